package diskstore

import "sync"

// smallBuf divides the buffers kept for reuse in two pools, so that a small one asked for
// never takes (and drops) a large one.
const smallBuf = 64 << 10

// Buffers keeps byte buffers for reuse: small ones (a span of an index, a header) apart from
// large ones (a sample, frames). The zero Buffers is ready to use, and safe for concurrent use.
type Buffers struct {
	small sync.Pool // *[]byte of smallBuf bytes' capacity
	large sync.Pool // *[]byte of more
}

func (b *Buffers) pool(n int) *sync.Pool {
	if n <= smallBuf {
		return &b.small
	}
	return &b.large
}

// Get returns a buffer of n bytes, reused if one large enough is kept; Put keeps it for reuse.
func (b *Buffers) Get(n int) *[]byte {
	p := b.pool(n)
	if bp, ok := p.Get().(*[]byte); ok {
		if cap(*bp) >= n {
			*bp = (*bp)[:n]
			return bp
		}
		p.Put(bp)
	}
	size := n
	if n <= smallBuf {
		size = smallBuf // one size for all small ones: any serves the next
	}
	buf := make([]byte, n, size)
	return &buf
}

// Put keeps bp, which Get returned, for reuse; its bytes must not be used after.
func (b *Buffers) Put(bp *[]byte) { b.pool(cap(*bp)).Put(bp) }
