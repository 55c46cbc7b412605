package s3src

import (
	"sync/atomic"
	"time"
)

// Stats counts a bucket's work since it was opened.
type Stats struct {
	Lists        int64   // ListObjectsV2 pages
	GETs         int64   // ranged GETs that fetched their bytes
	BytesFetched int64   // by those GETs
	FetchSeconds float64 // their time, retries included: the mean latency is FetchSeconds/GETs
	Retries      int64   // requests tried again (a timeout, a 5xx, a reset, throttling)
	Throttled    int64   // of Retries, the server asking for fewer requests (SlowDown, 503)
	FailedGETs   int64   // runs of blocks that could not be fetched within the bound
	// Blocks reads asked for: in memory already (Hits), on their way (Waits), or fetched for the
	// read (Misses, on demand).
	Hits, Waits, Misses int64
	// Ahead is the blocks Prefetch fetched (those it asked for that were neither in memory nor
	// on their way).
	Ahead         int64
	Evicted       int64 // blocks dropped for room
	CacheBytes    int64 // fetched bytes held in memory
	CacheCapacity int64
}

// counters are the Stats kept as they happen.
type counters struct {
	lists, gets, bytes, nanos, retries, throttled, failedGets atomic.Int64
	hits, waits, misses, aheadMisses, evicted                 atomic.Int64
}

func (c *counters) list() { c.lists.Add(1) }

func (c *counters) got(n int64, took time.Duration) {
	c.gets.Add(1)
	c.bytes.Add(n)
	c.nanos.Add(int64(took))
}

func (c *counters) retry(throttled bool) {
	c.retries.Add(1)
	if throttled {
		c.throttled.Add(1)
	}
}

func (c *counters) failed() { c.failedGets.Add(1) }

// Stats returns the bucket's counters.
func (b *Bucket) Stats() Stats {
	c := &b.counters
	return Stats{Lists: c.lists.Load(), GETs: c.gets.Load(), BytesFetched: c.bytes.Load(),
		FetchSeconds: time.Duration(c.nanos.Load()).Seconds(), Retries: c.retries.Load(), Throttled: c.throttled.Load(),
		FailedGETs: c.failedGets.Load(), Hits: c.hits.Load(), Waits: c.waits.Load(), Misses: c.misses.Load(),
		Ahead: c.aheadMisses.Load(), Evicted: c.evicted.Load(), CacheBytes: b.cache.bytes(), CacheCapacity: b.opts.CacheBytes}
}
