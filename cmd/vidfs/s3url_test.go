package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestS3URLs: every command that takes a source, a video or a mount point meets a malformed or
// odd s3:// URL with an error that says what is wrong, never a panic, and never by reading
// something the URL does not name (a key with "?" or "#" is a key, not a query or a fragment).
func TestS3URLs(t *testing.T) {
	s, _ := bucketSource(t)
	s3flags := []string{"--s3-endpoint", s.Endpoint(), "--s3-path-style", "--s3-timeout", "5s"}
	const form = "want s3://BUCKET"
	for _, c := range []struct {
		url string
		// probe is what vidfs probe of the URL says; source, what mount and verify of it say
		// ("": they are not run, for a prefix that would mount).
		probe, source string
	}{
		{"s3://", form, form},
		{"s3:///", form, form},
		{"s3:///key", form, form},
		{"s3://nope", "no object key", `bucket "nope" not found`},
		{"s3://nope/", "no object key", `bucket "nope" not found`},
		{"s3://train/ds/walk/", "names a prefix, not an object", ""},
		{"s3://train//ds", "empty", "empty"},
		{"s3://train/ds//walk/gop16.mp4", "empty", "empty"},
		{"s3://train/ds/\x00x", "control character", "control character"},
		{"s3://train/ds/\xffx", "UTF-8", "UTF-8"},
		{"s3://tr ain/ds", "bucket name", "bucket name"},
		{"s3://train:9000/ds", "bucket name", "bucket name"},
		{"s3://user@train/ds", "bucket name", "bucket name"},
		{"s3://train/ds/walk/gop16.mp4?x=1", "not found", "no samples"},
		{"s3://train/ds/walk/gop16.mp4#x", "not found", "no samples"},
		{"s3://train/ds/walk/%zz.mp4", "not found", "no samples"},
	} {
		t.Run(fmt.Sprintf("%q", c.url), func(t *testing.T) {
			lines := [][]string{
				slices.Concat([]string{"probe", c.url}, s3flags),
				{"clip", c.url, "--start", "0", "-o", filepath.Join(t.TempDir(), "x.npy")},
				{"stats", c.url},
				{"umount", c.url},
				{"bench", c.url, "--duration", "0"},
			}
			if c.source != "" {
				lines = append(lines,
					slices.Concat([]string{"mount", c.url, t.TempDir()}, s3flags),
					slices.Concat([]string{"verify", c.url, "--probe-cache", ""}, s3flags))
			}
			for _, line := range lines {
				code, errs := vidfsNoPanic(t, line...)
				if code == 0 {
					t.Errorf("vidfs %s %q: exit 0, want an error", line[0], c.url)
				}
				want := ""
				switch line[0] {
				case "probe":
					want = c.probe
				case "mount", "verify":
					want = c.source
				case "clip":
					want = "local file"
				}
				if !strings.Contains(errs, want) {
					t.Errorf("vidfs %s %q: exit %d, stderr %q, want %q in it", line[0], c.url, code, errs, want)
				}
			}
		})
	}
}

// vidfsNoPanic runs a command line as vidfs does, failing the test (not the test binary) if it
// panics.
func vidfsNoPanic(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("vidfs %q panicked: %v", args, r)
			code = -1
		}
	}()
	code, _, stderr = vidfs(t, args...)
	return code, stderr
}
