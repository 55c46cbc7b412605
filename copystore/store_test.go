package copystore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/testfd"
)

const frameWidth, frameBytes = 48, 48 * 48 * 3

// vkey is test video v's key.
func vkey(v int) diskstore.Key { return sha256.Sum256([]byte(fmt.Sprint("video ", v))) }

// frameOf is frame u of test video v: compressible, like video, and different for every frame.
func frameOf(v, u int) []byte {
	b := make([]byte, frameBytes)
	r := rand.New(rand.NewPCG(uint64(v), uint64(u)))
	for j := 0; j < len(b); j += 32 {
		x := byte(r.IntN(256))
		for k := j; k < j+32; k++ {
			b[k] = x + byte(k%5)
		}
	}
	return b
}

// framesOf is video v's frames units, one after another.
func framesOf(v int, units []int) []byte {
	var b []byte
	for _, u := range units {
		b = append(b, frameOf(v, u)...)
	}
	return b
}

func openStore(t *testing.T, c diskstore.Codec, dir string, maxBytes int64, due func(int) int) *Store {
	t.Helper()
	cp, err := Open(Options{Dir: dir, MaxBytes: maxBytes, Codec: c, FrameBytes: frameBytes, Width: frameWidth, Videos: 64, Due: due})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// closeCopies closes cp at the end of the test unless the test did.
func closeStore(t *testing.T, cp *Store) {
	t.Cleanup(func() { cp.Close() })
}

// get reads video v's frames units from cp and checks them when it says it held them.
func get(t *testing.T, cp *Store, v int, units []int) bool {
	t.Helper()
	dst := make([]byte, len(units)*frameBytes)
	ok := cp.Get(v, vkey(v), units, dst)
	if ok && !bytes.Equal(dst, framesOf(v, units)) {
		t.Fatalf("video %d frames %v: the copy gave other bytes", v, units)
	}
	return ok
}

func put(t *testing.T, cp *Store, v int, units []int) {
	t.Helper()
	if !cp.Put(context.Background(), v, vkey(v), 40, 100, units, framesOf(v, units), 0) {
		t.Fatalf("video %d frames %v: not queued", v, units)
	}
	cp.Flush()
}

func eachFrameCodec(t *testing.T, test func(t *testing.T, c diskstore.Codec)) {
	for _, c := range diskstore.Codecs {
		t.Run(c.String(), func(t *testing.T) { test(t, c) })
	}
}

// TestCopyFrames: frames put are read back byte for byte, in any clip of them, whatever the
// order they were put in; a clip with a frame missing is a miss; and the counts say so.
func TestCopyFrames(t *testing.T) {
	eachFrameCodec(t, func(t *testing.T, c diskstore.Codec) {
		cp := openStore(t, c, t.TempDir(), 1<<30, nil)
		closeStore(t, cp)
		put(t, cp, 3, []int{10, 12, 14, 16})
		put(t, cp, 3, []int{2, 4, 6, 8})
		put(t, cp, 3, []int{8, 10, 12, 14}) // already there: nothing written
		for _, clip := range [][]int{{2, 4, 6, 8}, {6, 8, 10, 12}, {4, 8, 12, 16}, {16}} {
			if !get(t, cp, 3, clip) {
				t.Errorf("clip %v: a miss", clip)
			}
		}
		for _, clip := range [][]int{{16, 18}, {1, 2}, {98, 99, 100}} {
			if get(t, cp, 3, clip) {
				t.Errorf("clip %v: a hit, with frames never put", clip)
			}
		}
		if get(t, cp, 4, []int{2, 4}) {
			t.Error("another video's clip: a hit")
		}
		dst := make([]byte, frameBytes)
		if cp.Get(3, vkey(99), []int{2}, dst) {
			t.Error("the video under another key (its file changed): a hit")
		}
		s := cp.Stats()
		if s.Frames != 8 || s.WrittenFrames != 8 || s.Videos != 1 || s.Hits != 4 || s.Misses != 5 || s.Corrupt != 0 {
			t.Errorf("stats %+v: want 8 frames written, 1 video, 4 hits, 5 misses", s)
		}
		if c != diskstore.None && s.StoredBytes >= s.WrittenBytes {
			t.Errorf("%v: stored %d bytes of %d", c, s.StoredBytes, s.WrittenBytes)
		}
		if fi, err := os.Stat(cp.path(vkey(3))); err != nil || fi.Size() != s.Bytes {
			t.Errorf("the file: %v, %v; the store counts %d bytes", fi.Size(), err, s.Bytes)
		}
	})
}

// TestCopyRemount: a copy closed and opened again serves what it held, counts it once its video
// is claimed, and a codec changed between mounts reads what the last one wrote.
func TestCopyRemount(t *testing.T) {
	dir := t.TempDir()
	cp := openStore(t, diskstore.Zstd, dir, 1<<30, nil)
	put(t, cp, 5, []int{0, 1, 2, 3, 4})
	put(t, cp, 6, []int{7})
	size := cp.Stats().Bytes
	if err := cp.Close(); err != nil {
		t.Fatal(err)
	}
	cp = openStore(t, diskstore.None, dir, 1<<30, nil)
	closeStore(t, cp)
	if s := cp.Stats(); s.Bytes != size || s.Videos != 2 || s.Frames != 0 {
		t.Errorf("reopened: %+v, want %d bytes in 2 videos, no frames counted before a claim", s, size)
	}
	cp.Claim(6, vkey(6), []uint64{1 << 7})
	if s := cp.Stats(); s.Frames != 1 || s.Complete != 1 {
		t.Errorf("video 6 claimed: %+v, want 1 frame, 1 video complete", s)
	}
	if !get(t, cp, 5, []int{1, 2, 3}) || !get(t, cp, 6, []int{7}) {
		t.Fatal("frames written before the remount: a miss")
	}
	put(t, cp, 5, []int{5, 6})
	if !get(t, cp, 5, []int{4, 5, 6}) {
		t.Fatal("frames of two codecs in one clip: a miss")
	}
}

// TestCopyDamage: a flipped byte in a frame, a file cut short, a damaged slot of the index and
// a damaged header are each a miss, counted and logged, never served; the next put of the
// frames writes them again, and they are served.
func TestCopyDamage(t *testing.T) {
	units := []int{0, 2, 4, 6}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, size int64)
	}{
		{"frame", func(t *testing.T, path string, size int64) { flipAt(t, path, size-100) }},
		{"slot", func(t *testing.T, path string, size int64) { flipAt(t, path, slotAt(4)+3) }},
		{"header", func(t *testing.T, path string, size int64) { flipAt(t, path, 20) }},
		{"cut", func(t *testing.T, path string, size int64) {
			if err := os.Truncate(path, size-frameBytes/2); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		eachFrameCodec(t, func(t *testing.T, c diskstore.Codec) {
			t.Run(tc.name, func(t *testing.T) {
				cp := openStore(t, c, t.TempDir(), 1<<30, nil)
				closeStore(t, cp)
				put(t, cp, 1, units)
				path := cp.path(vkey(1))
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				tc.damage(t, path, fi.Size())
				if get(t, cp, 1, units) {
					t.Fatal("damaged: a hit")
				}
				if s := cp.Stats(); s.Corrupt != 1 {
					t.Fatalf("corrupt %d, want 1", s.Corrupt)
				}
				put(t, cp, 1, units)
				if !get(t, cp, 1, units) {
					t.Fatal("written again: a miss")
				}
				if s := cp.Stats(); s.Bytes > 1<<30 || s.Frames != int64(len(units)) {
					t.Errorf("after the rewrite: %+v, want %d frames", s, len(units))
				}
			})
		})
	}
}

func flipAt(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestCopyCrash: what a crash can leave is never served wrong: frame bytes appended with no slot
// written (kill -9 between the two) are a miss, not damage; a slot whose bytes never reached the
// disk (a power cut) is caught by its checksum. Either way the frame is written again.
func TestCopyCrash(t *testing.T) {
	dir := t.TempDir()
	cp := openStore(t, diskstore.None, dir, 1<<30, nil)
	put(t, cp, 2, []int{0, 1})
	path := cp.path(vkey(2))
	cp.Close()
	// Frame 2's bytes appended, its slot not written.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if _, err := f.WriteAt(frameOf(2, 2), fi.Size()); err != nil {
		t.Fatal(err)
	}
	fi, _ = f.Stat()
	// Frame 1's bytes zeroed, as if they never reached the disk.
	if _, err := f.WriteAt(make([]byte, frameBytes), fi.Size()-2*frameBytes); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cp = openStore(t, diskstore.None, dir, 1<<30, nil)
	closeStore(t, cp)
	if get(t, cp, 2, []int{2}) {
		t.Fatal("a frame with no slot: a hit")
	}
	if s := cp.Stats(); s.Corrupt != 0 {
		t.Errorf("a frame with no slot counted damaged (%d)", s.Corrupt)
	}
	if get(t, cp, 2, []int{1}) {
		t.Fatal("a frame whose bytes never reached the disk: a hit")
	}
	if !get(t, cp, 2, []int{0}) {
		t.Fatal("a sound frame: a miss")
	}
	put(t, cp, 2, []int{0, 1, 2})
	if !get(t, cp, 2, []int{0, 1, 2}) {
		t.Fatal("written again: a miss")
	}
}

// TestCopyBound: the copy's files never take more than the bound, whatever is put.
func TestCopyBound(t *testing.T) {
	dir := t.TempDir()
	bound := int64(30 * frameBytes)
	cp := openStore(t, diskstore.None, dir, bound, nil)
	closeStore(t, cp)
	for v := range 20 {
		put(t, cp, v, []int{0, 1, 2, 3, 4})
		if used := du(t, dir); used > bound {
			t.Fatalf("after video %d: %d bytes on disk, bound %d", v, used, bound)
		}
	}
	s := cp.Stats()
	if s.Evicted == 0 || s.Bytes > bound || s.Bytes != du(t, dir) {
		t.Errorf("stats %+v: want evictions, %d bytes on disk within %d", s, du(t, dir), bound)
	}
	// A smaller bound at the next mount evicts at once.
	cp.Close()
	cp = openStore(t, diskstore.None, dir, bound/3, nil)
	closeStore(t, cp)
	if used := du(t, dir); used > bound/3 {
		t.Errorf("reopened with a third of the bound: %d bytes on disk", used)
	}
}

// du sums the sizes of the copy's files under dir.
func du(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(filepath.Join(dir, "frames"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestCopyEvictsByPlan: with room for two videos, a third evicts one no plan wants (the least
// recently used of those), but never one a plan wants, whenever it is due: a copy that cannot hold
// every video keeps those it holds rather than swap them.
func TestCopyEvictsByPlan(t *testing.T) {
	dues := map[int]int{}
	due := func(v int) int {
		if d, ok := dues[v]; ok {
			return d
		}
		return -1
	}
	dir := t.TempDir()
	one := framesStart(100) + 4*frameBytes
	cp := openStore(t, diskstore.None, dir, 2*one+one/2, due)
	closeStore(t, cp)
	units := []int{0, 1, 2, 3}
	dues[1], dues[2] = 100, 200
	put(t, cp, 1, units)
	put(t, cp, 2, units)
	dues[3] = 150 // due before video 2, after 1: no room is made for it
	cp.Put(context.Background(), 3, vkey(3), 4, 100, units, framesOf(3, units), 0)
	cp.Flush()
	if !get(t, cp, 1, units) || !get(t, cp, 2, units) || get(t, cp, 3, units) {
		t.Fatal("a video due sooner took the place of one held and wanted; want 1 and 2 held")
	}
	delete(dues, 2) // no plan wants video 2 now: it goes for 4
	dues[4] = 500
	put(t, cp, 4, units)
	if !get(t, cp, 1, units) || get(t, cp, 2, units) || !get(t, cp, 4, units) {
		t.Fatal("want video 2 (not wanted) evicted for 4, 1 kept")
	}
	if s := cp.Stats(); s.Evicted != 1 || s.Skipped == 0 {
		t.Errorf("stats %+v: want 1 eviction and video 3's frames skipped", s)
	}
}

// TestCopyAdmit: a video is admitted before its frames are decoded only where its whole copy
// fits beside what is held and what was promised to the videos admitted before; one the copy
// holds frames of always is; the room promised is taken as frames are written, and given back
// when a video is whole or Release says its frames will not all come.
func TestCopyAdmit(t *testing.T) {
	dir := t.TempDir()
	units := []int{0, 1, 2, 3}
	one := framesStart(100) + 4*frameBytes
	cp := openStore(t, diskstore.None, dir, 2*one+one/2, func(int) int { return 0 }) // every video wanted
	closeStore(t, cp)
	if !cp.Admit(1, vkey(1), 4, 100) || !cp.Admit(2, vkey(2), 4, 100) {
		t.Fatal("two videos that fit were refused")
	}
	if cp.Admit(3, vkey(3), 4, 100) {
		t.Fatal("a third was admitted: the room is promised to the first two")
	}
	if s := cp.Stats(); s.Promised != 2*one || s.Admitted != 2 || s.Refused != 1 {
		t.Errorf("stats %+v: want %d bytes promised, 2 admitted, 1 refused", s, 2*one)
	}
	put(t, cp, 1, units[:2]) // half of video 1
	if s := cp.Stats(); s.Promised != one+2*frameBytes {
		t.Errorf("half of video 1 written: %d bytes promised, want %d", s.Promised, one+2*frameBytes)
	}
	cp.Release(2) // video 2's frames will not come
	if !cp.Admit(3, vkey(3), 4, 100) {
		t.Fatal("video 2's room given back, video 3 still refused")
	}
	put(t, cp, 3, units)
	put(t, cp, 1, units[2:])
	if s := cp.Stats(); s.Promised != 0 {
		t.Errorf("videos 1 and 3 whole: %d bytes still promised", s.Promised)
	}
	if !cp.Admit(1, vkey(1), 4, 100) {
		t.Error("a video the copy holds was refused")
	}
}

// TestCopyBoundByFreeSpace: with no MaxBytes the copy takes what its filesystem has free, less
// KeepFree, and gives room back when other files take it.
func TestCopyBoundByFreeSpace(t *testing.T) {
	units := []int{0, 1, 2, 3}
	one := framesStart(100) + 4*frameBytes
	free := 10 * one
	cp, err := Open(Options{Dir: t.TempDir(), KeepFree: 4 * one, Codec: diskstore.None, FrameBytes: frameBytes, Width: frameWidth, Videos: 16})
	if err != nil {
		t.Fatal(err)
	}
	closeStore(t, cp)
	var mu sync.Mutex // guards free
	cp.free = func() (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		return free - cp.bytes, nil // what the test's disk has free: the copy's files take their room
	}
	cp.freeAt = time.Time{}
	admitted := 0
	for v := range 16 {
		cp.freeAt = time.Time{} // asked afresh
		if cp.Admit(v, vkey(v), 4, 100) {
			put(t, cp, v, units)
			admitted++
		}
	}
	if admitted != 6 {
		t.Fatalf("%d videos admitted, want 6: 10 videos' room free, 4 of them kept free", admitted)
	}
	mu.Lock()
	free -= 3 * one // another program writes 3 videos' worth
	mu.Unlock()
	cp.freeAt = time.Time{}
	if given := cp.GiveBack(); given < 3*one || given > 4*one {
		t.Errorf("gave back %d bytes, want about 3 videos' (%d)", given, 3*one)
	}
	if s := cp.Stats(); s.Videos != 3 || s.GivenBack == 0 {
		t.Errorf("stats %+v: want 3 videos left", s)
	}
}

// TestCopyReadError: a copy that cannot be read for the system's reasons (out of descriptors) is
// a miss, counted apart from damage, and kept: it is served once the descriptors are back.
func TestCopyReadError(t *testing.T) {
	cp := openStore(t, diskstore.None, t.TempDir(), 1<<30, nil)
	closeStore(t, cp)
	put(t, cp, 9, []int{3, 4})
	var ok bool
	testfd.Short(t, 0, func() { ok = get(t, cp, 9, []int{3, 4}) })
	if ok {
		t.Fatal("read with no descriptor left: a hit")
	}
	if s := cp.Stats(); s.ReadErrors != 1 || s.Corrupt != 0 {
		t.Errorf("stats %+v: want 1 read error, no damage", s)
	}
	if !get(t, cp, 9, []int{3, 4}) {
		t.Fatal("descriptors back: a miss")
	}
}

// TestCopyLock: a second store on the same directory is refused while the first holds it. (A
// sample tier is refused too: load's TestStoresShareLock.)
func TestCopyLock(t *testing.T) {
	dir := t.TempDir()
	cp := openStore(t, diskstore.None, dir, 1<<30, nil)
	closeStore(t, cp)
	if _, err := Open(Options{Dir: dir, MaxBytes: 1 << 30, Codec: diskstore.None, FrameBytes: frameBytes, Videos: 1}); err == nil {
		t.Fatal("a second store on one directory was opened")
	}
}

// TestCopyMemoryPerVideo: the store keeps at most 72 bytes of memory a video, nothing per frame:
// a store of 200,000 videos, and the frames of some, grow the heap by no more.
func TestCopyMemoryPerVideo(t *testing.T) {
	const videos = 200_000
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	cp, err := Open(Options{Dir: t.TempDir(), MaxBytes: 1 << 40, Codec: diskstore.None, FrameBytes: frameBytes, Width: frameWidth, Videos: videos})
	if err != nil {
		t.Fatal(err)
	}
	closeStore(t, cp)
	units := make([]int, 64)
	for u := range units {
		units[u] = u
	}
	for v := 0; v < videos; v += videos / 8 {
		cp.Put(context.Background(), v, vkey(v), 64, 64, units, framesOf(v, units), 0)
		cp.Flush()
	}
	after := heap()
	if per := float64(after-before) / videos; per > 72 {
		t.Errorf("%.1f bytes of heap a video (%d videos, 512 frames kept), want at most 72", per, videos)
	}
	runtime.KeepAlive(cp)
}

// TestCopyServesQueued: frames put are served at once, whether the writer has written them yet
// or they still wait in its queue, and a clip with a frame in neither is a miss.
func TestCopyServesQueued(t *testing.T) {
	eachFrameCodec(t, func(t *testing.T, c diskstore.Codec) {
		cp := openStore(t, c, t.TempDir(), 1<<30, nil)
		closeStore(t, cp)
		for v := range 20 {
			units := []int{v, v + 2, v + 4}
			if !cp.Put(context.Background(), v, vkey(v), 3, 100, units, framesOf(v, units), 0) {
				t.Fatal("not queued")
			}
			if !get(t, cp, v, units) || !get(t, cp, v, units[1:]) {
				t.Fatalf("video %d: frames just put are a miss", v)
			}
			if get(t, cp, v, []int{v, v + 1}) {
				t.Fatalf("video %d: a frame never put is a hit", v)
			}
		}
	})
}

// TestCopyClaimCounts: a file found at Open is counted by Claim whether or not a read adopted it
// first, and only the frames the video's samples use count towards it being whole.
func TestCopyClaimCounts(t *testing.T) {
	dir := t.TempDir()
	cp := openStore(t, diskstore.None, dir, 1<<30, nil)
	put(t, cp, 1, []int{0, 2, 4, 6})
	put(t, cp, 2, []int{0, 2, 4, 6})
	cp.Close()
	cp = openStore(t, diskstore.None, dir, 1<<30, nil)
	closeStore(t, cp)
	if !get(t, cp, 1, []int{0, 2}) { // adopts video 1's file before any Claim
		t.Fatal("a miss")
	}
	even := []uint64{0b1010101} // frames 0, 2, 4, 6
	cp.Claim(1, vkey(1), even)
	if s := cp.Stats(); s.Frames != 4 || s.Complete != 1 || !cp.Whole(1) {
		t.Errorf("video 1 read, then claimed: %+v, want 4 frames, whole", s)
	}
	thirds := []uint64{0b1001001} // frames 0, 3, 6: 3 is not in the copy
	cp.Claim(2, vkey(2), thirds)
	if s := cp.Stats(); s.Frames != 6 || cp.Whole(2) {
		t.Errorf("video 2 claimed for frames 0, 3, 6: %+v, whole %v; want 2 of its frames counted, not whole", s, cp.Whole(2))
	}
}

// TestCopyNoRoomLeavesNothing: frames of a new video with no room for them leave no file behind
// (nor anything that reads as damage later).
func TestCopyNoRoomLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	due := func(v int) int { return v } // video 0 is due first: nothing makes room for video 1
	one := framesStart(100) + 4*frameBytes
	cp := openStore(t, diskstore.None, dir, one+2048, due) // not room for another file's header
	closeStore(t, cp)
	units := []int{0, 1, 2, 3}
	put(t, cp, 0, units)
	cp.Put(context.Background(), 1, vkey(1), 4, 100, units, framesOf(1, units), 0)
	cp.Flush()
	if _, err := os.Stat(cp.path(vkey(1))); !os.IsNotExist(err) {
		t.Errorf("video 1, with no room: its file %v", err)
	}
	if get(t, cp, 1, units) || !get(t, cp, 0, units) {
		t.Fatal("want video 0 held, video 1 not")
	}
	if s := cp.Stats(); s.Corrupt != 0 || s.Videos != 1 || s.Bytes != du(t, dir) {
		t.Errorf("stats %+v, %d bytes on disk: want no damage, one video", s, du(t, dir))
	}
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestCopyCloseStuckWriter: a writer stuck on a disk that does not answer holds Close only for a
// bounded time: Close warns, gives up, and says what is stuck, and the directory stays locked
// meanwhile. The writer, once the disk answers, finishes the frames it was writing and lets go
// of what it used: the directory's lock (a store opens there again), its descriptor (none is left
// open) and its coders (no goroutine outlives the tests).
func TestCopyCloseStuckWriter(t *testing.T) {
	openStore(t, diskstore.Zstd, t.TempDir(), 1<<30, nil).Close() // whatever the first store opens for good
	fds := openFDs(t)
	dir := t.TempDir()
	cp := openStore(t, diskstore.Zstd, dir, 1<<30, nil)
	cp.closeWarn = 10 * time.Millisecond
	held, hold := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cp.beforeWrite = func() { // the disk stops answering once the first frames are on their way
		once.Do(func() { close(held) })
		<-hold
	}
	units := []int{0, 1, 2}
	for v := range 3 {
		if !cp.Put(context.Background(), v, vkey(v), len(units), 100, units, framesOf(v, units), 0) {
			t.Fatalf("video %d: frames not queued", v)
		}
	}
	<-held
	closed := make(chan error, 1)
	go func() { closed <- cp.Close() }()
	select {
	case err := <-closed:
		if err == nil || !strings.Contains(err.Error(), "writer is stuck") || !strings.Contains(err.Error(), "video 0") {
			t.Errorf("Close with the writer stuck: %v; want an error saying the writer is stuck, on video 0's frames", err)
		}
	case <-time.After(30 * time.Second): // a guard, far above the bound (a few closeWarns)
		t.Errorf("Close has not returned 30 s after it began, with its writer stuck: it waits for the disk forever")
		close(hold)
		<-closed
		return
	}
	if other, err := Open(Options{Dir: dir, MaxBytes: 1 << 30, Codec: diskstore.None, FrameBytes: frameBytes, Videos: 64}); err == nil {
		other.Close()
		t.Error("a store opened on the directory while the stuck writer still holds it")
	}
	close(hold) // the disk answers: the writer writes video 0's frames, drops the rest, and ends
	<-cp.w.Done()
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors open after the stuck writer ended, %d before the store was opened", n, fds)
	}
	cp = openStore(t, diskstore.Zstd, dir, 1<<30, nil) // the directory was let go
	closeStore(t, cp)
	if !get(t, cp, 0, units) || get(t, cp, 1, units) || get(t, cp, 2, units) {
		t.Errorf("after the stuck Close: videos 0, 1, 2 held: %v %v %v; want the one being written only", get(t, cp, 0, units), get(t, cp, 1, units), get(t, cp, 2, units))
	}
}

// TestCopyClaimWhileWriting: frames written to a file while Claim counts it are counted: the
// writer waits for the count, so that the video reads whole at once, not after a remount.
func TestCopyClaimWhileWriting(t *testing.T) {
	dir := t.TempDir()
	cp := openStore(t, diskstore.None, dir, 1<<30, nil)
	put(t, cp, 1, []int{0, 2})
	cp.Close()
	cp = openStore(t, diskstore.None, dir, 1<<30, nil)
	closeStore(t, cp)
	counted, release := make(chan struct{}), make(chan struct{})
	cp.afterCount = func() { close(counted); <-release }
	claimed := make(chan struct{})
	go func() {
		cp.Claim(1, vkey(1), []uint64{0b1010101}) // frames 0, 2, 4, 6
		close(claimed)
	}()
	<-counted // the index is read: frames 0 and 2
	units := []int{4, 6}
	if !cp.Put(context.Background(), 1, vkey(1), 4, 100, units, framesOf(1, units), 0) {
		t.Fatal("not queued")
	}
	time.Sleep(50 * time.Millisecond) // the writer, had it not waited, would have written them now
	close(release)
	<-claimed
	cp.Flush()
	if s := cp.Stats(); !cp.Whole(1) || s.Frames != 4 {
		t.Errorf("frames 4 and 6 written while frames 0 and 2 were counted: %+v, whole %v; want 4 frames, whole", s, cp.Whole(1))
	}
}

// TestCopyOldFormat: files of an earlier format of the copy are kept, counted apart (not
// against the bound), and removed only when the disk has no room for what the copy writes,
// oldest first.
func TestCopyOldFormat(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "frames", "v0", "ab")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for k := range 2 {
		p := filepath.Join(old, vkey(100+k).String())
		if err := os.WriteFile(p, make([]byte, 8192), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(time.Duration(k-2) * time.Hour) // the first is the oldest
		os.Chtimes(p, when, when)
		paths = append(paths, p)
	}
	// Files that are not the copy's, under its directory: never counted, never removed.
	mine := []string{filepath.Join(dir, "frames", "clip1", "000001.jpg"), filepath.Join(dir, "frames", "v0", "notes.txt")}
	for _, p := range mine {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-24 * time.Hour)
		os.Chtimes(p, old, old)
	}
	cp := openStore(t, diskstore.None, dir, 1<<30, nil)
	closeStore(t, cp)
	if s := cp.Stats(); s.OldFiles != 2 || s.OldBytes != 16384 || s.Bytes != 0 {
		t.Errorf("opened beside two files of an earlier format: %+v; want them counted apart, none against the bound", s)
	}
	// The disk has room for the header's block, not for a frame beside the slack.
	cp.free = func() (int64, error) { return diskSlack + 4096 + 100, nil }
	put(t, cp, 1, []int{0})
	_, err0 := os.Stat(paths[0])
	_, err1 := os.Stat(paths[1])
	if !os.IsNotExist(err0) || err1 != nil {
		t.Errorf("the disk short of room for a frame: the oldest file %v, the newer %v; want the oldest removed, the newer kept", err0, err1)
	}
	if s := cp.Stats(); s.OldFiles != 1 || s.OldBytes != 8192 || s.OldRemoved != 1 {
		t.Errorf("%+v: want one old file left, one removed", s)
	}
	for _, p := range mine {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("a file not the copy's, %s: %v", p, err)
		}
	}
	if !get(t, cp, 1, []int{0}) {
		t.Error("the frame written is a miss")
	}
}

// TestCopyBacklogFull: frames put with the writer's backlog full are not queued, and counted as
// such (Stats.Full), apart from those the writer could not write.
func TestCopyBacklogFull(t *testing.T) {
	cp, err := Open(Options{Dir: t.TempDir(), MaxBytes: 1 << 30, Codec: diskstore.None, FrameBytes: frameBytes, Width: frameWidth, Videos: 4,
		Backlog: 3 * (frameBytes + recordSize)})
	if err != nil {
		t.Fatal(err)
	}
	closeStore(t, cp)
	hold := make(chan struct{})
	cp.beforeWrite = func() { <-hold }
	for u := range 5 {
		cp.Put(context.Background(), 1, vkey(1), 5, 10, []int{u}, frameOf(1, u), 0)
	}
	if s := cp.Stats(); s.Full != 2 || s.Skipped != 0 {
		t.Errorf("5 frames put into a backlog of 3: %+v; want 2 not queued for a full backlog", s)
	}
	close(hold)
	cp.Flush()
}

// TestCopyGetRacesWrite: reads of a file the writer is appending to never take sound frames for
// damaged (a slot read points at bytes written before it, whatever the size was at open).
func TestCopyGetRacesWrite(t *testing.T) {
	cp := openStore(t, diskstore.None, t.TempDir(), 1<<30, nil)
	closeStore(t, cp)
	var next atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for u := range 2000 {
			next.Store(int64(u))
			cp.Put(context.Background(), 1, vkey(1), 2000, 2000, []int{u}, frameOf(1, u), 0)
			if u%50 == 0 {
				cp.Flush()
			}
		}
		cp.Flush()
	}()
	dst := make([]byte, frameBytes)
	for {
		select {
		case <-done:
			if s := cp.Stats(); s.Corrupt > 0 || s.Hits == 0 {
				t.Errorf("reads racing the writer: %+v; want none damaged, some hits", s)
			}
			return
		default:
		}
		u := int(next.Load())
		cp.Get(1, vkey(1), []int{u + 1}, dst)
		cp.Get(1, vkey(1), []int{u}, dst)
	}
}

// TestCopySplitQueueFile: a span of frames some of which are written and the rest still queued
// is served, from both.
func TestCopySplitQueueFile(t *testing.T) {
	cp := openStore(t, diskstore.None, t.TempDir(), 1<<30, nil)
	closeStore(t, cp)
	put(t, cp, 1, []int{0, 1}) // written
	hold := make(chan struct{})
	cp.beforeWrite = func() { <-hold }
	units := []int{2, 3}
	cp.Put(context.Background(), 1, vkey(1), 4, 100, units, framesOf(1, units), 0) // queued
	if !get(t, cp, 1, []int{0, 1, 2, 3}) {
		t.Error("frames 0-1 written and 2-3 queued: 0-3 a miss")
	}
	close(hold)
}

// TestCopyClaimAfterWrite: a file Claim counts while a write of it is under way (its frames on
// disk, not yet counted) has them counted once: Claim waits for the write.
func TestCopyClaimAfterWrite(t *testing.T) {
	dir := t.TempDir()
	cp := openStore(t, diskstore.None, dir, 1<<30, nil)
	put(t, cp, 1, []int{0, 2})
	cp.Close()
	cp = openStore(t, diskstore.None, dir, 1<<30, nil)
	closeStore(t, cp)
	cp.Adopt(1, vkey(1))
	written, release := make(chan struct{}), make(chan struct{})
	cp.beforeCounted = func() { close(written); <-release }
	units := []int{4, 6}
	cp.Put(context.Background(), 1, vkey(1), 4, 100, units, framesOf(1, units), 0)
	<-written // frames 4 and 6 are on disk, not yet counted
	claimed := make(chan struct{})
	go func() {
		cp.Claim(1, vkey(1), []uint64{0b1010101})
		close(claimed)
	}()
	time.Sleep(50 * time.Millisecond) // Claim, had it not waited, would have counted them now
	close(release)
	<-claimed
	cp.Flush()
	if s := cp.Stats(); s.Frames != 4 || !cp.Whole(1) {
		t.Errorf("4 frames on disk: %+v, whole %v; want 4 counted, whole", s, cp.Whole(1))
	}
}
