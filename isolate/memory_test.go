package isolate

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkHandover: what handing a sample of 16 frames of 224x224 from a helper to the cache
// costs, besides the decode that writes it, both ways issue 51 weighed (run in one process, two
// mappings standing for the two processes'):
//
//   - window: the helper writes into its window, mapped once, and the mount copies the sample
//     into the cache's buffer (what Decoders does);
//   - window-released: the same, the window's pages given back after each, so that each request
//     faults them in anew;
//   - mapping: a memfd for the cache's buffer, made for each request, mapped by the mount and by
//     the helper, written through the helper's mapping (fresh pages, faulted in), the helper's
//     mapping let go, and the mount's replaced when the buffer is freed.
func BenchmarkHandover(b *testing.B) {
	const size = 16 * 224 * 224 * 3
	fill := func(p []byte) {
		for i := 0; i < len(p); i += 64 {
			p[i] = byte(i)
		}
	}
	b.Run("window", func(b *testing.B) {
		w, err := newWindow(size)
		if err != nil {
			b.Fatal(err)
		}
		defer w.close()
		helper, err := mapGuarded(w.fd, size)
		if err != nil {
			b.Fatal(err)
		}
		defer unmapGuarded(helper)
		cache := make([]byte, size)
		b.SetBytes(size)
		for b.Loop() {
			fill(helper)
			copy(cache, w.mem)
		}
	})
	b.Run("window-released", func(b *testing.B) {
		w, err := newWindow(size)
		if err != nil {
			b.Fatal(err)
		}
		defer w.close()
		helper, err := mapGuarded(w.fd, size)
		if err != nil {
			b.Fatal(err)
		}
		defer unmapGuarded(helper)
		cache := make([]byte, size)
		b.SetBytes(size)
		for b.Loop() {
			fill(helper)
			copy(cache, w.mem)
			unix.Fallocate(w.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, size)
		}
	})
	b.Run("mapping", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			fd, mine, err := sharedMemory("bench", size)
			if err != nil {
				b.Fatal(err)
			}
			helper, err := mapGuarded(fd, size)
			if err != nil {
				b.Fatal(err)
			}
			fill(helper)
			unmapGuarded(helper)
			unix.Close(fd)
			_ = mine[size-1]
			unix.Munmap(mine)
		}
	})
}
