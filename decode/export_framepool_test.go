package decode

// FrameBuffers reports what a pool's shared frame buffers did (framepool.go): buffers handed out
// again, buffers allocated, and bytes idle now.
func FrameBuffers(p *Pool) (reused, made uint64, idle int64) {
	s := p.frames.stats()
	return s.Reused, s.Made, s.Idle
}
