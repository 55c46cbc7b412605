package s3src

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// IsURL tells whether a mount's source names a bucket (s3://BUCKET/PREFIX) rather than a directory.
func IsURL(src string) bool { return strings.HasPrefix(src, "s3://") }

// ParseURL splits s3://BUCKET/PREFIX into the bucket and the prefix, which ends in "/" unless
// it is empty. The key part is taken as it is written, as the AWS CLI takes it: "%20", "?" and
// "#" are characters of the key, not escapes, a query or a fragment.
func ParseURL(src string) (bucket, prefix string, err error) {
	bucket, prefix, err = splitURL(src)
	if err != nil {
		return "", "", err
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return bucket, prefix, nil
}

// ParseObjectURL splits s3://BUCKET/KEY, which names one object, into the bucket and the key;
// a URL without a key, or one ending in "/" (a prefix), is an error.
func ParseObjectURL(src string) (bucket, key string, err error) {
	bucket, key, err = splitURL(src)
	switch {
	case err != nil:
		return "", "", err
	case key == "":
		return "", "", fmt.Errorf("%q: no object key: want s3://BUCKET/KEY", src)
	case strings.HasSuffix(key, "/"):
		return "", "", fmt.Errorf("%q names a prefix, not an object: want s3://BUCKET/KEY", src)
	}
	return bucket, key, nil
}

// maxKey is the longest key S3 takes, in bytes.
const maxKey = 1024

// splitURL checks src and splits it at the first "/" after the bucket; the key may be empty or
// end in "/".
func splitURL(src string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(src, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q: want s3://BUCKET or s3://BUCKET/PREFIX", src)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%q: no bucket: want s3://BUCKET or s3://BUCKET/PREFIX", src)
	}
	if err := checkBucket(bucket); err != nil {
		return "", "", fmt.Errorf("%q: %w", src, err)
	}
	switch {
	case !utf8.ValidString(key):
		return "", "", fmt.Errorf("%q: the key is not UTF-8, as S3 keys are", src)
	case strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", "", fmt.Errorf("%q: a control character in the key", src)
	case len(key) > maxKey:
		return "", "", fmt.Errorf("%q: a key longer than S3's %d bytes", src, maxKey)
	case strings.HasPrefix(key, "/") || strings.Contains(key, "//"):
		// S3 takes such keys, but the videos under them would have empty folder names.
		return "", "", fmt.Errorf("%q: an empty path segment (\"//\" or a key starting with \"/\"): want s3://BUCKET/PREFIX", src)
	}
	return bucket, key, nil
}

// checkBucket tells whether name can be a bucket's name: 1 to 255 letters, digits, dots,
// hyphens and underscores (AWS's names are a stricter subset; other servers allow more). An
// endpoint (host:port) or credentials in its place get a hint.
func checkBucket(name string) error {
	bad := strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_')
	})
	var r rune
	if bad >= 0 {
		r, _ = utf8.DecodeRuneInString(name[bad:])
	}
	switch {
	case r == ':' || r == '@':
		return fmt.Errorf("bucket name %q: a bucket name has no %q (give the server with --s3-endpoint, credentials through the AWS chain)", name, r)
	case bad >= 0:
		return fmt.Errorf("bucket name %q: %q is not allowed (letters, digits, '.', '-' and '_')", name, r)
	case len(name) > 255:
		return fmt.Errorf("bucket name %q: longer than 255 characters", name)
	}
	return nil
}
