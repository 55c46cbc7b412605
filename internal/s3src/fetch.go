package s3src

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/vidfs/vidfs/decode"
)

// ErrUnavailable is in the error of a read whose bytes could not be had within the bound
// (Options.Timeout): the network or the server was down, or too slow. A later read may succeed.
var ErrUnavailable = errors.New("object storage unavailable")

// Object is one object listed under the prefix.
type Object struct {
	Rel      string // its key less the prefix
	Size     int64
	ETag     string // as the server gives it, quoted
	Modified time.Time
}

// object is a listed object as reads see it.
type object struct {
	path, key string
	size      int64
	etag      string
	sem       chan struct{}                // a token per GET in flight on it
	changed   atomic.Pointer[changedError] // set once a GET finds it replaced
}

// changedError says how an object differs from what was listed.
type changedError struct{ reason string }

func (e *changedError) Error() string { return e.reason }

// Unwrap makes the error decode.ErrChanged to errors.Is.
func (e *changedError) Unwrap() error { return decode.ErrChanged }

// List lists the objects under the prefix (ListObjectsV2, paginated), sorted by key, leaving out
// folder markers (keys ending in /), and makes them readable by Open.
func (b *Bucket) List(ctx context.Context) ([]Object, error) {
	var out []Object
	p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{Bucket: aws.String(b.bucket), Prefix: aws.String(b.prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", b.Name(), err)
		}
		b.counters.list()
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if strings.HasSuffix(key, "/") {
				continue
			}
			out = append(out, Object{Rel: strings.TrimPrefix(key, b.prefix), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), Modified: aws.ToTime(o.LastModified)})
		}
	}
	b.add(out)
	return out, nil
}

// Head looks up one object (HeadObject) by its key less the prefix, and makes it readable by
// Open, as List does for all.
func (b *Bucket) Head(ctx context.Context, rel string) (Object, error) {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(b.prefix + rel)})
	if err != nil {
		return Object{}, fmt.Errorf("%s: %w", b.Path(rel), err)
	}
	o := Object{Rel: rel, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), Modified: aws.ToTime(out.LastModified)}
	b.add([]Object{o})
	return o, nil
}

// add makes listed objects readable by Open.
func (b *Bucket) add(objs []Object) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, o := range objs {
		path := b.Path(o.Rel)
		b.objects[path] = &object{path: path, key: b.prefix + o.Rel, size: o.Size, etag: o.ETag, sem: make(chan struct{}, b.opts.PerObject)}
	}
}

// Open returns a reader of the listed object at path (s3://BUCKET/KEY): a decode.Source.
func (b *Bucket) Open(path string) (decode.Source, error) {
	o, err := b.object(path)
	if err != nil {
		return nil, err
	}
	return &reader{b: b, o: o}, nil
}

func (b *Bucket) object(path string) (*object, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.objects[path]
	if o == nil {
		return nil, fmt.Errorf("%s: not among the objects listed", path)
	}
	return o, nil
}

// reader reads an object through the block cache, for one demuxer (FFmpeg calls it from one
// goroutine at a time, so its fields need no lock).
type reader struct {
	b *Bucket
	o *object
	// next is where the last read ended; window is how many blocks a read that starts there
	// and finds its bytes missing fetches (doubling, up to MaxRun), so that a demuxer reading
	// through an object (a probe reads every packet) takes a GET per MaxRun, not per block.
	next, window int64
}

// Size is the object's size as listed.
func (r *reader) Size() int64 { return r.o.size }

// ReadAt reads from memory, fetching the blocks not there first, and waits at most the bucket's
// Timeout for them. A fetch it joined that failed, it starts again while time is left.
func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.o.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.o.size-off))
	ctx, cancel := context.WithTimeout(r.b.ctx, r.b.opts.Timeout)
	defer cancel()
	for {
		done, err := r.read(ctx, p[:n], off)
		var c *changedError
		if err == nil || errors.As(err, &c) || ctx.Err() != nil {
			if err == nil && n < len(p) {
				err = io.EOF
			}
			return done, err
		}
	}
}

// read is one try of ReadAt for bytes within the object. A read that follows the last fetches
// the blocks after its own with them, as many as the window says, which doubles each time.
func (r *reader) read(ctx context.Context, p []byte, off int64) (int, error) {
	bs := r.b.opts.BlockSize
	end := off + int64(len(p))
	if off != r.next || r.window == 0 {
		r.window = 1
	}
	ahead := min(r.o.size, max(end, (off/bs+r.window)*bs))
	blocks, missed, err := r.b.fetch(ctx, r.o, off, ahead, false)
	if err != nil {
		return 0, err
	}
	blocks = blocks[:(end-1)/bs-off/bs+1] // those of the read's bytes
	if missed && off == r.next {
		r.window = min(2*r.window, r.b.opts.MaxRun/bs)
	}
	r.next = end
	done := 0
	for _, bl := range blocks {
		select {
		case <-bl.done:
		case <-ctx.Done():
			return done, r.b.unavailable(fmt.Sprintf("%s: no bytes within %v (--s3-timeout)", r.o.path, r.b.opts.Timeout), ctx.Err())
		}
		if bl.err != nil {
			return done, bl.err
		}
		at := off + int64(done) - bl.idx*bs
		done += copy(p[done:], bl.data[at:])
	}
	return done, nil
}

// Prefetch starts fetching bytes [off, end) of the object at path (end past its size: to its
// end), unless they are in memory or on their way, and returns once their GETs have started
// (waiting while as many are in flight as the bounds allow), so that calls in order of need fetch
// in that order. n is the length of the range within the object.
func (b *Bucket) Prefetch(ctx context.Context, path string, off, end int64) (n int64, err error) {
	o, err := b.object(path)
	if err != nil {
		return 0, err
	}
	end = min(end, o.size)
	if off >= end {
		return 0, nil
	}
	_, _, err = b.fetch(ctx, o, off, end, true)
	return end - off, err
}

// fetch returns the blocks holding [off, end) of o, starting GETs for those neither in memory
// nor on their way, in runs of consecutive blocks, and whether there were any. With wait it
// waits for the GETs' tokens before returning (Prefetch); otherwise the GETs wait for them in
// the background.
func (b *Bucket) fetch(ctx context.Context, o *object, off, end int64, wait bool) ([]*block, bool, error) {
	if c := o.changed.Load(); c != nil {
		return nil, false, c
	}
	bs := b.opts.BlockSize
	blocks, runs := b.cache.want(o, off/bs, (end-1)/bs, b.opts.MaxRun/bs, wait, &b.counters)
	for i, r := range runs {
		if !wait {
			if !b.spawn(func() { b.get(o, r) }) {
				b.cache.fail(r, b.unavailable(o.path, context.Canceled))
			}
			continue
		}
		err := b.acquire(ctx, o)
		if err == nil && !b.spawn(func() { b.getHeld(o, r) }) {
			b.release(o)
			err = b.unavailable(o.path, context.Canceled)
		}
		if err != nil {
			for _, r := range runs[i:] {
				b.cache.fail(r, err)
			}
			return nil, true, err
		}
	}
	return blocks, len(runs) > 0, nil
}

// unavailable is the error of a read or a GET that gave up, what saying which, for err (the
// bound's, or the bucket's Close's): ErrUnavailable either way.
func (b *Bucket) unavailable(what string, err error) error {
	if b.ctx.Err() != nil {
		return fmt.Errorf("%s: %w: the mount is closing", what, ErrUnavailable)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}

func (b *Bucket) acquire(ctx context.Context, o *object) error {
	select {
	case o.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case b.global <- struct{}{}:
		return nil
	case <-ctx.Done():
		<-o.sem
		return ctx.Err()
	}
}

func (b *Bucket) release(o *object) {
	<-b.global
	<-o.sem
}

// get fetches a run of blocks once a GET may start, within the bucket's Timeout.
func (b *Bucket) get(o *object, r []*block) {
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.Timeout)
	defer cancel()
	if err := b.acquire(ctx, o); err != nil {
		b.cache.fail(r, b.unavailable(fmt.Sprintf("%s: no GET could start within %v (--s3-timeout)", o.path, b.opts.Timeout), err))
		return
	}
	b.getHeld(o, r)
}

// getHeld fetches a run of blocks holding a GET's tokens, retrying failed GETs and reads of their
// bodies with backoff until the bucket's Timeout, and hands the blocks their bytes or the error.
func (b *Bucket) getHeld(o *object, r []*block) {
	defer b.release(o)
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.Timeout)
	defer cancel()
	bs := b.opts.BlockSize
	start, end := r[0].idx*bs, min((r[len(r)-1].idx+1)*bs, o.size)
	var err error
	for attempt := 0; ; attempt++ {
		var data []byte
		began := time.Now()
		data, err = b.getRange(ctx, o, start, end)
		if err == nil {
			b.counters.got(int64(len(data)), time.Since(began))
			b.cache.fill(r, data, bs, &b.counters)
			return
		}
		var c *changedError
		if errors.As(err, &c) {
			if o.changed.CompareAndSwap(nil, c) {
				b.opts.Log.Error("object changed under the mount: its samples fail", "object", o.path, "reason", c.reason)
			}
			break
		}
		if ctx.Err() != nil {
			err = b.unavailable(fmt.Sprintf("%s: bytes %d-%d not fetched within %v (--s3-timeout)", o.path, start, end-1, b.opts.Timeout), err)
			break
		}
		b.counters.retry(throttled(err))
		select {
		case <-time.After(min(backoff(attempt), b.maxBackoff())):
		case <-ctx.Done():
		}
	}
	b.counters.failed()
	b.cache.fail(r, err)
}

// backoff is how long to wait before try attempt+2 of a GET whose retries all failed: doubling
// from 100 ms.
func backoff(attempt int) time.Duration { return 100 * time.Millisecond << min(attempt, 5) }

// getRange GETs bytes [start, end) of o if it is still the version listed.
func (b *Bucket) getRange(ctx context.Context, o *object, start, end int64) ([]byte, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(o.key), Range: aws.String(fmt.Sprintf("bytes=%d-%d", start, end-1))}
	if o.etag != "" {
		in.IfMatch = aws.String(o.etag)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) {
			switch re.HTTPStatusCode() {
			case http.StatusPreconditionFailed:
				return nil, &changedError{fmt.Sprintf("its ETag is no longer %s", o.etag)}
			case http.StatusNotFound:
				return nil, &changedError{"it was deleted"}
			case http.StatusRequestedRangeNotSatisfiable:
				return nil, &changedError{fmt.Sprintf("it is now shorter than %d bytes", o.size)}
			}
		}
		return nil, fmt.Errorf("%s: GET bytes %d-%d: %w", o.path, start, end-1, err)
	}
	defer out.Body.Close()
	if total := rangeTotal(aws.ToString(out.ContentRange)); total >= 0 && total != o.size {
		return nil, &changedError{fmt.Sprintf("its size is now %d bytes, not %d", total, o.size)}
	}
	if tag := aws.ToString(out.ETag); o.etag != "" && tag != "" && tag != o.etag {
		return nil, &changedError{fmt.Sprintf("its ETag is now %s, not %s", tag, o.etag)}
	}
	data := make([]byte, end-start)
	if _, err := io.ReadFull(out.Body, data); err != nil {
		return nil, fmt.Errorf("%s: reading bytes %d-%d: %w", o.path, start, end-1, err)
	}
	return data, nil
}

// rangeTotal is the object size a Content-Range header ("bytes 0-99/1234") gives, or -1.
func rangeTotal(h string) int64 {
	_, total, ok := strings.Cut(h, "/")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// blockKey names a block: its object and its index (offset / BlockSize).
type blockKey struct {
	o   *object
	idx int64
}

// block is BlockSize bytes of an object (fewer at its end), in memory or on their way.
type block struct {
	blockKey
	done chan struct{} // closed once data or err is set
	data []byte
	err  error
}

// blockCache holds the fetched blocks, least recently used evicted past its bound, and the
// blocks on their way, which are not counted or evicted.
type blockCache struct {
	mu       sync.Mutex // guards everything below; taken after Bucket.mu, never before
	capacity int64
	used     int64 // bytes of the blocks in lru
	// lru holds the blocks in memory, bounded in bytes (capacity), not in blocks: its own bound
	// on entries is never reached, and fill evicts the least recently used past capacity.
	lru     *simplelru.LRU[blockKey, *block]
	pending map[blockKey]*block // on their way: not yet in lru
}

func (c *blockCache) init(capacity int64) {
	lru, err := simplelru.NewLRU[blockKey, *block](math.MaxInt, nil) // bounded in bytes by fill
	if err != nil {
		panic(err) // only for a size below 1
	}
	c.capacity, c.lru, c.pending = capacity, lru, map[blockKey]*block{}
}

// want returns blocks first..last of o, adding those missing as on their way, and the runs of
// added consecutive blocks, each at most maxRun long, which the caller must fetch. ahead says
// the asking is fetching ahead, counted apart from reads.
func (c *blockCache) want(o *object, first, last, maxRun int64, ahead bool, n *counters) (blocks []*block, runs [][]*block) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var run []*block
	for i := first; i <= last; i++ {
		k := blockKey{o, i}
		bl, inMemory := c.lru.Get(k) // made the most recently used
		if !inMemory {
			bl = c.pending[k]
		}
		switch {
		case inMemory:
			if !ahead {
				n.hits.Add(1)
			}
		case bl != nil:
			if !ahead {
				n.waits.Add(1)
			}
		default:
			if ahead {
				n.aheadMisses.Add(1)
			} else {
				n.misses.Add(1)
			}
			bl = &block{blockKey: k, done: make(chan struct{})}
			c.pending[k] = bl
			if len(run) > 0 && (run[len(run)-1].idx != i-1 || int64(len(run)) >= maxRun) {
				runs, run = append(runs, run), nil
			}
			run = append(run, bl)
		}
		blocks = append(blocks, bl)
	}
	if len(run) > 0 {
		runs = append(runs, run)
	}
	return blocks, runs
}

// fill gives a run of blocks their bytes, consecutive from the run's first block, and evicts the
// least recently used blocks past the bound, the run's own included when it is larger.
func (c *blockCache) fill(r []*block, data []byte, bs int64, n *counters) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, bl := range r {
		bl.data = data[int64(k)*bs : min(int64(k+1)*bs, int64(len(data)))]
		delete(c.pending, bl.blockKey)
		c.lru.Add(bl.blockKey, bl) // the most recently used
		c.used += int64(len(bl.data))
		close(bl.done)
	}
	// The run's own blocks go last; those evicted still serve the reads waiting for them.
	for c.used > c.capacity {
		_, old, _ := c.lru.RemoveOldest()
		c.used -= int64(len(old.data))
		n.evicted.Add(1)
	}
}

// fail gives a run of blocks an error and forgets them, so that the next read fetches again.
func (c *blockCache) fail(r []*block, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, bl := range r {
		bl.err = err
		delete(c.pending, bl.blockKey)
		close(bl.done)
	}
}

// bytes is the memory the cache holds.
func (c *blockCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Unchanged tells whether the object at path has not been found replaced since it was listed.
func (b *Bucket) Unchanged(path string) bool {
	o, err := b.object(path)
	return err == nil && o.changed.Load() == nil
}
