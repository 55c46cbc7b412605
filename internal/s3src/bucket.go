// Package s3src reads the videos of an S3 bucket (AWS, MinIO, Ceph, GCS through its S3 API) for a
// mount: it lists the objects under a prefix, and serves their bytes to the demuxer from a
// bounded memory cache of fixed-size blocks, fetched with ranged GETs, on demand or ahead of time
// (Prefetch) in runs of blocks, a few GETs in flight per object and a bound in all. It never
// writes to the bucket.
//
// A GET names the ETag the listing saw (If-Match), so an object replaced under the mount fails
// with decode.ErrChanged and a reason instead of mixing versions. Timeouts, 5xx and throttling
// are retried with backoff until the read's bound (Options.Timeout), after which reads fail; the
// next read tries again.
package s3src

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// Options says how to reach a bucket and how much to fetch at once.
type Options struct {
	Endpoint  string // e.g. http://127.0.0.1:9000 (MinIO, Ceph, GCS); "": AWS
	Region    string // "": from the AWS configuration, else us-east-1
	PathStyle bool   // bucket in the path, not the host name (most non-AWS servers)
	// Timeout bounds how long a read waits for bytes, retries included, before it fails
	// (default 30 s).
	Timeout time.Duration
	// CacheBytes bounds the memory for fetched bytes (default 256 MiB).
	CacheBytes int64
	// BlockSize is the unit fetched and cached (default 1 MiB): a GET fetches a run of blocks.
	BlockSize int64
	// PerObject and InFlight bound the GETs in flight on one object and in all (defaults 2, 16).
	PerObject, InFlight int
	// MaxRun bounds a GET's length (default 8 MiB, at most half of CacheBytes).
	MaxRun int64
	Log    *slog.Logger
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 256 << 20
	}
	if o.BlockSize <= 0 {
		o.BlockSize = 1 << 20
	}
	if o.PerObject <= 0 {
		o.PerObject = 2
	}
	if o.InFlight <= 0 {
		o.InFlight = 16
	}
	if o.MaxRun < o.BlockSize {
		o.MaxRun = max(8<<20, o.BlockSize)
	}
	// A run fetched ahead must fit in memory with room to spare, or it evicts itself.
	o.MaxRun = max(o.BlockSize, min(o.MaxRun, o.CacheBytes/2/o.BlockSize*o.BlockSize))
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Bucket is an opened bucket: its client, the objects listed, and the cache of their bytes.
type Bucket struct {
	opts           Options
	client         *s3.Client
	bucket, prefix string
	counters       counters
	global         chan struct{} // a token per GET in flight, in all

	conns  conns           // every connection the client dials, which Close closes
	ctx    context.Context // cancelled by Close: ends every read and GET
	cancel context.CancelFunc
	gets   sync.WaitGroup // the GETs' goroutines, which Close waits for

	mu      sync.Mutex         // guards objects and closed; taken before cache.mu, never after
	objects map[string]*object // by path (s3://BUCKET/KEY), as listed
	closed  bool               // by Close: no GET starts
	cache   blockCache
}

// Open makes a client from the standard AWS chain (environment, shared files, AWS_PROFILE, web
// identity, instance metadata) and checks, within opts.Timeout, that it has credentials and
// reaches the bucket, failing with an error that says which it lacks.
func Open(ctx context.Context, src string, opts Options) (*Bucket, error) {
	opts.defaults()
	bucket, prefix, err := ParseURL(src)
	if err != nil {
		return nil, err
	}
	b := &Bucket{opts: opts, bucket: bucket, prefix: prefix, objects: map[string]*object{},
		global: make(chan struct{}, opts.InFlight)}
	b.cache.init(opts.CacheBytes)
	load := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return &countingRetryer{b.newRetryer(), &b.counters} }),
		// Each attempt is bounded, so that a connection that hangs is retried within the read's bound.
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(max(opts.Timeout/3, 2*time.Second)).
			WithTransportOptions(func(tr *http.Transport) {
				b.conns.dial = tr.DialContext
				if b.conns.dial == nil {
					b.conns.dial = (&net.Dialer{}).DialContext
				}
				tr.DialContext = b.conns.dialContext
			})),
	}
	if opts.Region != "" {
		load = append(load, config.WithRegion(opts.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the AWS configuration: %w", src, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	b.client = s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.PathStyle
		// A ranged GET has no whole-object checksum to check; the SDK would log so at each.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(cctx); err != nil {
		return nil, fmt.Errorf("%s: no AWS credentials (looked in the environment, AWS_PROFILE and the shared config and credentials files, web identity and the instance metadata service): %w", src, err)
	}
	_, err = b.client.HeadBucket(cctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}, func(o *s3.Options) {
		o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 2)
	})
	if err != nil {
		b.conns.closeAll()
		return nil, b.startError(err)
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// Close ends the reads and GETs under way, which fail with ErrUnavailable, as do reads after
// it, waits for the GETs' goroutines, and closes the bucket's connections.
func (b *Bucket) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.gets.Wait()
	b.conns.closeAll()
}

// spawn runs a GET's function in a goroutine that Close waits for, unless the bucket is closed:
// then it returns false, running nothing.
func (b *Bucket) spawn(get func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.gets.Add(1)
	go func() {
		defer b.gets.Done()
		get()
	}()
	return true
}

// startError says why the bucket could not be reached: the endpoint, the bucket or the access.
func (b *Bucket) startError(err error) error {
	endpoint := b.opts.Endpoint
	if endpoint == "" {
		endpoint = "AWS S3"
	}
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	var re *awshttp.ResponseError
	switch {
	case b.opts.Endpoint != "" && !b.opts.PathStyle && errors.As(err, &de) && de.IsNotFound:
		return fmt.Errorf("cannot reach bucket %q at %s as host %s: add --s3-path-style for a server that takes the bucket in the path (most MinIO and Ceph set-ups), else check --s3-endpoint: %w", b.bucket, endpoint, de.Name, err)
	case errors.As(err, &oe) || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Errorf("cannot reach the S3 endpoint %s (check --s3-endpoint): %w", endpoint, err)
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound:
		return fmt.Errorf("bucket %q not found at %s: %w", b.bucket, endpoint, err)
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusForbidden:
		return fmt.Errorf("access to bucket %q at %s denied (check the credentials and their permissions): %w", b.bucket, endpoint, err)
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusMovedPermanently:
		return fmt.Errorf("bucket %q is in another region than %s (set --s3-region): %w", b.bucket, endpoint, err)
	}
	return fmt.Errorf("bucket %q at %s: %w", b.bucket, endpoint, err)
}

// newRetryer retries timeouts, 5xx and throttling with jittered exponential backoff, as often as
// a read's bound allows: it has no retry quota, which under a steady few per cent of errors
// would fail reads that one more try would serve.
func (b *Bucket) newRetryer() aws.RetryerV2 {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 10
		o.MaxBackoff = b.maxBackoff()
		o.RateLimiter = ratelimit.None
	})
}

// maxBackoff bounds the wait between tries: 2 s, or a quarter of the read's bound if less, so
// that a read still has tries left when the network comes back.
func (b *Bucket) maxBackoff() time.Duration { return min(2*time.Second, b.opts.Timeout/4) }

// countingRetryer counts the retries and, of them, the throttled requests.
type countingRetryer struct {
	aws.RetryerV2
	c *counters
}

// RetryDelay counts a retry, then asks the standard retryer for its delay.
func (r *countingRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	r.c.retry(throttled(err))
	return r.RetryerV2.RetryDelay(attempt, err)
}

// throttled tells whether err is the server asking for fewer requests (SlowDown, 503).
func throttled(err error) bool {
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "SlowDown" {
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusServiceUnavailable
}

// Name is the bucket and prefix as an s3:// URL.
func (b *Bucket) Name() string { return "s3://" + b.bucket + "/" + b.prefix }

// Path is the name a listed object's Rel goes by in probe tables and messages: s3://BUCKET/KEY.
func (b *Bucket) Path(rel string) string { return "s3://" + b.bucket + "/" + b.prefix + rel }
