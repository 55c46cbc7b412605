package decode

// DisableAdoption keeps a pool's idle GPU decoders to their own videos (video.adopt), so that a
// test has decoders opened afresh to compare with.
func DisableAdoption(p *Pool) { p.noAdopt = true }
