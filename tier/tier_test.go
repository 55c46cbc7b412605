package tier

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/diskstore"
)

const sampleBytes = 48 << 10

// key is the key of test entry i.
func key(i int) diskstore.Key { return sha256.Sum256([]byte(fmt.Sprint("entry ", i))) }

// sample is test entry i's bytes: compressible, like video, and different for every i.
func sample(i int) []byte {
	b := make([]byte, sampleBytes)
	r := rand.New(rand.NewPCG(uint64(i), 7))
	for j := 0; j < len(b); j += 64 {
		v := byte(r.IntN(256))
		for k := j; k < j+64 && k < len(b); k++ {
			b[k] = v + byte(k%3)
		}
	}
	binary.LittleEndian.PutUint64(b, uint64(i))
	return b
}

// eachCodec runs test once for every codec and way of reading: what the tier promises holds for
// each.
func eachCodec(t *testing.T, test func(t *testing.T, c diskstore.Codec, w way)) {
	for _, c := range Codecs {
		for _, w := range ways {
			t.Run(c.String()+"/"+w.name, func(t *testing.T) { test(t, c, w) })
		}
	}
}

// way is how a test reads entries: with Get, which reads them into dst, or with Map, which maps
// those stored as they are (here copied into dst, and unmapped).
type way struct {
	name string
	read func(tr *Tier, k diskstore.Key, tag int, dst []byte) bool
}

var ways = []way{{"get", (*Tier).Get}, {"map", mapInto}}

func mapInto(tr *Tier, k diskstore.Key, tag int, dst []byte) bool {
	m, ok := tr.Map(k, tag, dst)
	if ok && m.Bytes != nil {
		if len(m.Bytes) != len(dst) {
			panic("mapped an entry of another size")
		}
		copy(dst, m.Bytes)
		m.Unmap()
	}
	return ok
}

func open(t *testing.T, c diskstore.Codec, dir string, maxBytes int64, due func(int) int) *Tier {
	t.Helper()
	tr, err := Open(Options{Dir: dir, MaxBytes: maxBytes, Codec: c, Due: due})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// get reads entry i and says whether it was there; it fails the test if wrong bytes came back.
func (w way) get(t *testing.T, tr *Tier, i int) bool {
	t.Helper()
	dst := make([]byte, sampleBytes)
	if !w.read(tr, key(i), i, dst) {
		return false
	}
	if !bytes.Equal(dst, sample(i)) {
		t.Fatalf("entry %d: wrong bytes served", i)
	}
	return true
}

// onDisk is the bytes of entry files under dir, and how many there are.
func onDisk(t *testing.T, dir string) (int64, int) {
	var total int64
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if _, ok := diskstore.ParseKey(d.Name()); ok {
				info, _ := d.Info()
				total += info.Size()
				n++
			}
		}
		return nil
	})
	return total, n
}

// TestRoundTrip: what is put comes back identical, compressed on disk (but with none), after a
// reopen too; a size that does not match is a miss.
func TestRoundTrip(t *testing.T) { eachCodec(t, testRoundTrip) }

func testRoundTrip(t *testing.T, c diskstore.Codec, w way) {
	dir := t.TempDir()
	tr := open(t, c, dir, 64<<20, nil)
	for i := range 10 {
		if !tr.Put(key(i), i, sample(i)) {
			t.Fatalf("put %d refused", i)
		}
	}
	tr.Flush()
	for i := range 10 {
		if !w.get(t, tr, i) {
			t.Errorf("entry %d missing", i)
		}
	}
	if w.get(t, tr, 99) {
		t.Error("an entry never put was found")
	}
	st := tr.Stats()
	if st.Entries != 10 || st.Hits != 10 || st.Misses != 1 || st.Codec != c {
		t.Errorf("stats %+v: want 10 entries, 10 hits, 1 miss, codec %v", st, c)
	}
	if c == diskstore.None && st.StoredBytes != st.WrittenBytes+10*headerSize || c != diskstore.None && st.StoredBytes >= st.WrittenBytes/2 {
		t.Errorf("%d bytes stored for %d with %v: want them as they are with none, at most half with the others", st.StoredBytes, st.WrittenBytes, c)
	}
	if b, n := onDisk(t, dir); n != 10 || b != st.Bytes {
		t.Errorf("%d files of %d bytes on disk; the tier counts %d bytes", n, b, st.Bytes)
	}
	tr.Close()
	tr = open(t, c, dir, 64<<20, nil)
	defer tr.Close()
	for i := range 10 {
		if !w.get(t, tr, i) {
			t.Errorf("entry %d missing after reopening", i)
		}
	}
	if w.read(tr, key(1), 1, make([]byte, sampleBytes-1)) {
		t.Error("an entry was served into a buffer of another size")
	}
}

// TestDamage: an entry with a flipped byte (in its data, or its header's key, lengths, codec or
// checksum), cut short, grown, or holding another key's bytes is dropped and reported as a miss,
// never served.
func TestDamage(t *testing.T) { eachCodec(t, testDamage) }

func testDamage(t *testing.T, c diskstore.Codec, w way) {
	dir := t.TempDir()
	tr := open(t, c, dir, 64<<20, nil)
	const n = 10
	for i := range n {
		tr.Put(key(i), i, sample(i))
	}
	tr.Flush()
	tr.Close()
	path := func(i int) string { return filepath.Join(dir, diskstore.SamplesDir, key(i).Rel()) }
	mutate := func(i int, f func([]byte) []byte) {
		b, err := os.ReadFile(path(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path(i), f(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mutate(0, func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }) // a flipped bit in the data
	mutate(1, func(b []byte) []byte { return b[:len(b)-100] })         // cut short
	mutate(2, func(b []byte) []byte { return append(b, 0) })           // grown
	mutate(3, func(b []byte) []byte { b[20] ^= 1; return b })          // the key in its header
	mutate(4, func(b []byte) []byte { b[61] ^= 1; return b })          // the checksum
	mutate(5, func(b []byte) []byte { b[52] ^= 1; return b })          // the codec
	mutate(6, func(b []byte) []byte { b[40] ^= 1; return b })          // the sample's length
	mutate(7, func(b []byte) []byte { b[48] ^= 1; return b })          // the stored length
	const damagedN = 8
	other, _ := os.ReadFile(path(damagedN)) // another entry's file under key n's name
	os.MkdirAll(filepath.Dir(path(n)), 0o755)
	os.WriteFile(path(n), other, 0o644)

	tr = open(t, c, dir, 64<<20, nil)
	defer tr.Close()
	for i := range damagedN {
		if w.get(t, tr, i) {
			t.Errorf("damaged entry %d served", i)
		}
		if _, err := os.Stat(path(i)); !os.IsNotExist(err) {
			t.Errorf("damaged entry %d left on disk", i)
		}
	}
	if w.get(t, tr, n) {
		t.Error("an entry holding another key's bytes served")
	}
	if !w.get(t, tr, damagedN) || !w.get(t, tr, damagedN+1) {
		t.Error("a sound entry missing")
	}
	if st := tr.Stats(); st.Corrupt != damagedN+1 {
		t.Errorf("%d damaged entries counted, want %d", st.Corrupt, damagedN+1)
	}
	// Put again, it is served again.
	tr.Put(key(0), 0, sample(0))
	tr.Flush()
	if !w.get(t, tr, 0) {
		t.Error("entry 0 not served after it was written again")
	}
}

// TestReadError: an entry that cannot be read for a reason other than damage (here EMFILE: the
// process is out of file descriptors) is a miss, counted and logged as a read error, not as
// damage; it stays on disk and in the index, and is served once it can be read again.
func TestReadError(t *testing.T) { eachCodec(t, testReadError) }

func testReadError(t *testing.T, c diskstore.Codec, w way) {
	dir := t.TempDir()
	var logged strings.Builder // written by Get on this goroutine alone
	tr, err := Open(Options{Dir: dir, MaxBytes: 64 << 20, Codec: c, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.Put(key(0), 0, sample(0))
	tr.Flush()

	// Lower the soft limit on open files to the lowest free descriptor, so that the next open
	// fails with EMFILE, and put it back at once. The limit is the process's: no test of this
	// package may run in parallel with this one (none calls t.Parallel).
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	probe, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(probe.Fd())
	probe.Close()
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	served := w.read(tr, key(0), 0, make([]byte, sampleBytes))
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}

	if served {
		t.Fatal("an entry was served though its file could not be opened")
	}
	st := tr.Stats()
	if st.Corrupt != 0 || st.ReadErrors != 1 || st.Misses != 1 || st.Entries != 1 {
		t.Errorf("stats %+v: want 1 read error, 1 miss, nothing counted damaged, the entry kept", st)
	}
	if _, n := onDisk(t, dir); n != 1 {
		t.Errorf("%d entry files on disk, want the one that could not be read", n)
	}
	if log := logged.String(); !strings.Contains(log, "too many open files") || strings.Contains(log, "damaged") {
		t.Errorf("log %q: want the read error as it is, not damage", log)
	}
	if !w.get(t, tr, 0) {
		t.Error("the entry was not served once it could be read")
	}
}

// TestBound: the tier never holds more than its bound, on disk or in its count, and eviction
// keeps the entries due soonest over those not due.
func TestBound(t *testing.T) { eachCodec(t, testBound) }

func testBound(t *testing.T, c diskstore.Codec, w way) {
	dir := t.TempDir()
	var mu sync.Mutex
	due := map[int]int{} // tag (entry number) -> how soon it is due
	dueOf := func(tag int) int {
		mu.Lock()
		defer mu.Unlock()
		if d, ok := due[tag]; ok {
			return d
		}
		return -1
	}
	if _, err := Open(Options{Dir: dir, MaxBytes: 0, Codec: c}); err == nil {
		t.Fatal("a tier of 0 bytes opened")
	}
	probe := open(t, c, dir, 1<<30, nil)
	probe.Put(key(0), 0, sample(0))
	probe.Flush()
	one := probe.Stats().Bytes
	probe.Close()
	os.RemoveAll(dir)

	tr := open(t, c, dir, 10*one+one/2, dueOf) // room for 10
	defer tr.Close()
	mu.Lock()
	for i := range 5 {
		due[i] = 100 + i // 0..4 are due soon
	}
	mu.Unlock()
	for i := range 40 {
		tr.Put(key(i), i, sample(i))
		tr.Flush()
		st := tr.Stats()
		b, _ := onDisk(t, dir)
		if st.Bytes > st.MaxBytes || b > st.MaxBytes {
			t.Fatalf("after %d puts: %d bytes counted, %d on disk, bound %d", i+1, st.Bytes, b, st.MaxBytes)
		}
	}
	for i := range 5 {
		if !w.get(t, tr, i) {
			t.Errorf("entry %d, due soon, was evicted for entries not due", i)
		}
	}
	// An entry that is not due takes no due entry's place.
	mu.Lock()
	for i := 30; i < 40; i++ {
		due[i] = 50
	}
	mu.Unlock()
	tr.Put(key(100), 100, sample(100))
	tr.Flush()
	if tr.Has(key(100)) {
		t.Error("an entry not due took the place of one due")
	}
	if st := tr.Stats(); st.Skipped == 0 {
		t.Errorf("the refused entry not counted as skipped: %+v", st)
	}
}

// TestBacklog: Put never waits; past the backlog bound it skips.
func TestBacklog(t *testing.T) { eachCodec(t, testBacklog) }

func testBacklog(t *testing.T, c diskstore.Codec, w way) {
	tr, err := Open(Options{Dir: t.TempDir(), MaxBytes: 1 << 30, Codec: c, Backlog: 3 * sampleBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	hold := make(chan struct{})
	tr.beforeWrite = func() { <-hold } // a writer slower than the Puts, whatever the disk
	queued := 0
	for i := range 50 {
		if tr.Put(key(i), i, sample(i)) {
			queued++
		}
	}
	close(hold)
	tr.Flush()
	st := tr.Stats()
	if queued != 3 || st.Skipped != 47 || st.Written != 3 {
		t.Errorf("%d of 50 queued, stats %+v: want 3 queued (the backlog's room), 47 skipped, 3 written", queued, st)
	}
}

// TestLock: a directory serves one tier at a time, and the error says so.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	tr := open(t, diskstore.Zstd, dir, 1<<20, nil)
	if _, err := Open(Options{Dir: dir, MaxBytes: 1 << 20, Codec: diskstore.Zstd}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("a second tier on the same directory: %v", err)
	}
	tr.Close()
	open(t, diskstore.Zstd, dir, 1<<20, nil).Close()
}

// TestKilledWhileWriting: kill -9 of a process writing entries leaves a tier the next Open
// uses: no temporary files, every entry either sound or dropped when read, and every entry that
// was on disk before the kill served.
func TestKilledWhileWriting(t *testing.T) {
	if dir := os.Getenv("VIDFS_TIER_WRITER"); dir != "" {
		c, err := diskstore.ParseCodec(os.Getenv("VIDFS_TIER_CODEC"))
		if err != nil {
			os.Exit(3)
		}
		tr, err := Open(Options{Dir: dir, MaxBytes: 1 << 30, Codec: c})
		if err != nil {
			os.Exit(3)
		}
		os.WriteFile(filepath.Join(dir, "started"), nil, 0o644)
		for i := 0; ; i++ {
			for !tr.Has(key(i)) && !tr.Put(key(i), i, sample(i)) { // written by an earlier round, or the backlog is full
				time.Sleep(time.Millisecond)
			}
		}
	}
	eachCodec(t, testKilledWhileWriting)
}

func testKilledWhileWriting(t *testing.T, c diskstore.Codec, w way) {
	dir := t.TempDir()
	for round := range 3 {
		_, before := onDisk(t, dir)
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWhileWriting$")
		cmd.Env = append(os.Environ(), "VIDFS_TIER_WRITER="+dir, "VIDFS_TIER_CODEC="+c.String())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) // if the test ends before the kill below
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the writer did not start")
			}
		}
		// Killed once it has written entries of its own, a few more each round, so that the kill
		// falls at different points; the wait is bounded only for a writer that writes nothing.
		seen := waitForEntries(t, dir, before+1+50*round, 30*time.Second)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		os.Remove(filepath.Join(dir, "started"))

		tr := open(t, c, dir, 1<<30, nil)
		if tmp, _ := os.ReadDir(filepath.Join(dir, diskstore.SamplesDir, "tmp")); len(tmp) != 0 {
			t.Errorf("round %d: %d temporary files left after Open", round, len(tmp))
		}
		st := tr.Stats()
		served := 0
		for i := 0; i < st.Entries+st.Backlog+1000 && i < 100000; i++ {
			if tr.Has(key(i)) && w.get(t, tr, i) {
				served++
			}
		}
		if served < seen {
			t.Errorf("round %d: %d entries usable of the %d on disk before the kill (%d indexed)", round, served, seen, st.Entries)
		}
		tr.Close()
	}
}

// TestCodecChange: a tier reopened with another codec serves what was written with the last one,
// exactly, beside what it writes itself; every entry is read as its own header says.
func TestCodecChange(t *testing.T) {
	dir := t.TempDir()
	for k, c := range Codecs {
		tr := open(t, c, dir, 64<<20, nil)
		for i := range 3 {
			tr.Put(key(10*k+i), 10*k+i, sample(10*k+i))
		}
		tr.Flush()
		tr.Close()
	}
	for _, c := range Codecs {
		w := ways[int(c)%len(ways)] // each way reads entries of every codec
		tr := open(t, c, dir, 64<<20, nil)
		for k := range Codecs {
			for i := range 3 {
				if !w.get(t, tr, 10*k+i) {
					t.Errorf("opened with %v: entry %d, written with %v, missing", c, 10*k+i, Codecs[k])
				}
			}
		}
		if st := tr.Stats(); st.Corrupt != 0 {
			t.Errorf("opened with %v: %d entries taken for damaged", c, st.Corrupt)
		}
		tr.Close()
	}
}

// TestIncompressible: bytes that compressing does not shrink are stored as they are, whatever the
// codec, and read back.
func TestIncompressible(t *testing.T) {
	eachCodec(t, func(t *testing.T, c diskstore.Codec, w way) {
		tr := open(t, c, t.TempDir(), 64<<20, nil)
		defer tr.Close()
		noise := make([]byte, sampleBytes)
		r := rand.New(rand.NewPCG(1, 2))
		for j := range noise {
			noise[j] = byte(r.Uint32())
		}
		tr.Put(key(0), 0, noise)
		tr.Flush()
		dst := make([]byte, sampleBytes)
		if !w.read(tr, key(0), 0, dst) || !bytes.Equal(dst, noise) {
			t.Fatal("incompressible entry not served as written")
		}
		if st := tr.Stats(); st.StoredBytes != sampleBytes+headerSize {
			t.Errorf("%d bytes stored for %d incompressible ones", st.StoredBytes, sampleBytes)
		}
	})
}

// legacyEntry is entry i as vidfs wrote it before codecs: a 56-byte header (magic, key, length,
// CRC-32C of the sample's bytes, stored length), then a zstd frame with its own checksum.
func legacyEntry(t *testing.T, i int) []byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithNoEntropyCompression(true), zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	raw := sample(i)
	b := enc.EncodeAll(raw, make([]byte, legacyHeaderSize))
	k := key(i)
	copy(b, legacyMagic)
	copy(b[8:40], k[:])
	binary.LittleEndian.PutUint64(b[40:48], uint64(len(raw)))
	binary.LittleEndian.PutUint32(b[48:52], crc32.Checksum(raw, castagnoli))
	binary.LittleEndian.PutUint32(b[52:56], uint32(len(b)-legacyHeaderSize))
	return b
}

// TestLegacyEntries: entries written before codecs are served, exactly, by a tier of any codec;
// a damaged one is dropped.
func TestLegacyEntries(t *testing.T) {
	eachCodec(t, func(t *testing.T, c diskstore.Codec, w way) {
		dir := t.TempDir()
		for i := range 3 {
			b := legacyEntry(t, i)
			if i == 1 {
				b[len(b)/2] ^= 0x10
			}
			s := key(i).String()
			os.MkdirAll(filepath.Join(dir, diskstore.SamplesDir, s[:2]), 0o755)
			if err := os.WriteFile(filepath.Join(dir, diskstore.SamplesDir, s[:2], s), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tr := open(t, c, dir, 64<<20, nil)
		defer tr.Close()
		if !w.get(t, tr, 0) || !w.get(t, tr, 2) {
			t.Error("a sound entry written before codecs was not served")
		}
		if w.get(t, tr, 1) || tr.Stats().Corrupt != 1 {
			t.Error("a damaged entry written before codecs was not dropped")
		}
	})
}

// BenchmarkGet: a hit, for each codec, into a buffer like the memory cache's; allocs/op is what
// a read allocates (nothing: its buffers are reused). Made-up samples of 2.4 MB; fs's
// BenchmarkTierHit measures real footage. Only tests call Get; the mount calls Map.
func BenchmarkGet(b *testing.B) {
	benchHit(b, func(tr *Tier, k diskstore.Key, dst []byte) bool { return tr.Get(k, 0, dst) })
}

// BenchmarkMap: a hit as the mount takes it: an entry stored as it is is mapped (and its mapping
// let go), a compressed one decompressed into the buffer. allocs/op is what a hit allocates.
func BenchmarkMap(b *testing.B) {
	benchHit(b, func(tr *Tier, k diskstore.Key, dst []byte) bool {
		m, ok := tr.Map(k, 0, dst)
		m.Unmap()
		return ok
	})
}

// benchHit times hit on one stored sample of 2.4 MB, for each codec, after a first hit (the
// tier's reusable buffers made, the entry's bytes checked).
func benchHit(b *testing.B, hit func(tr *Tier, k diskstore.Key, dst []byte) bool) {
	const S = 16 * 224 * 224 * 3
	for _, c := range Codecs {
		b.Run(c.String(), func(b *testing.B) {
			tr, err := Open(Options{Dir: b.TempDir(), MaxBytes: 1 << 30, Codec: c})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			raw := bytes.Repeat(sample(0), S/sampleBytes+1)[:S]
			tr.Put(key(0), 0, raw)
			tr.Flush()
			dst, k := make([]byte, S), key(0)
			hit(tr, k, dst)
			b.SetBytes(S)
			b.ReportAllocs()
			for b.Loop() {
				if !hit(tr, k, dst) {
					b.Fatal("miss")
				}
			}
		})
	}
}

// waitForEntries waits until there are at least n entry files under dir, and returns how many
// there are; it fails the test if there are not within limit.
func waitForEntries(t *testing.T, dir string, n int, limit time.Duration) int {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(time.Millisecond) {
		if _, got := onDisk(t, dir); got >= n {
			return got
		}
		if time.Now().After(deadline) {
			_, got := onDisk(t, dir)
			t.Fatalf("%d entries on disk after %v, want %d: the writer writes nothing", got, limit, n)
		}
	}
}

// TestMapChecksOnce: Map checks an entry's bytes the first time it maps its file, and not again
// while the file is that version; a file changed in place since (same inode and size) is checked
// again and, damaged, dropped; a file whose change time is too recent to tell versions apart is
// checked every time. A mapping outlives its entry's eviction. A compressed entry is read into
// dst instead.
func TestMapChecksOnce(t *testing.T) {
	dir := t.TempDir()
	tr := open(t, diskstore.None, dir, 64<<20, nil)
	defer tr.Close()
	for i := range 3 {
		tr.Put(key(i), i, sample(i))
	}
	tr.Flush()
	byMap := ways[1]
	// Change times too recent to trust (here: younger than an hour): every Map checks, and a byte
	// changed in place right after one is caught by the next.
	tr.trustAge = time.Hour
	for range 2 {
		if !byMap.get(t, tr, 2) {
			t.Fatal("entry 2 missing")
		}
	}
	if st := tr.Stats(); st.Checked != 0 {
		t.Fatalf("%d versions trusted with change times under %v old", st.Checked, tr.trustAge)
	}
	s2 := key(2).String()
	flip(t, filepath.Join(dir, diskstore.SamplesDir, s2[:2], s2))
	if byMap.get(t, tr, 2) {
		t.Fatal("an entry changed in place right after it was mapped was served")
	}
	// Old enough (here: any age): the first Map checks, the next ones trust.
	tr.trustAge = 0
	for range 3 {
		if !byMap.get(t, tr, 0) || !byMap.get(t, tr, 1) {
			t.Fatal("entries 0 and 1 missing")
		}
	}
	if st := tr.Stats(); st.Checked != 2 || st.Hits != 8 {
		t.Fatalf("%d versions checked and trusted in %d hits; want 2 in 8", st.Checked, st.Hits)
	}
	time.Sleep(20 * time.Millisecond) // past the change-time clock's tick (1-10 ms)
	// Changed in place, same inode and size: checked again, and dropped.
	s := key(0).String()
	flip(t, filepath.Join(dir, diskstore.SamplesDir, s[:2], s))
	if byMap.get(t, tr, 0) {
		t.Fatal("an entry changed in place after it was checked was served")
	}
	if st := tr.Stats(); st.Corrupt != 2 {
		t.Errorf("%d entries counted damaged, want 2", st.Corrupt)
	}
	// A mapping outlives its entry.
	m, ok := tr.Map(key(1), 1, make([]byte, sampleBytes))
	if !ok || m.Bytes == nil {
		t.Fatal("entry 1 not mapped")
	}
	s = key(1).String()
	if err := os.Remove(filepath.Join(dir, diskstore.SamplesDir, s[:2], s)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Bytes, sample(1)) {
		t.Error("a mapping changed when its entry's file was removed")
	}
	m.Unmap()
	if byMap.get(t, tr, 1) {
		t.Error("a removed entry was served")
	}

	// Compressed: read into dst, not mapped.
	z := open(t, diskstore.Zstd, t.TempDir(), 64<<20, nil)
	defer z.Close()
	z.Put(key(5), 5, sample(5))
	z.Flush()
	dst := make([]byte, sampleBytes)
	m, ok = z.Map(key(5), 5, dst)
	if !ok || m.Bytes != nil || !bytes.Equal(dst, sample(5)) {
		t.Errorf("a compressed entry: served %v, mapped %v, bytes right %v; want it read into dst", ok, m.Bytes != nil, bytes.Equal(dst, sample(5)))
	}
}

// TestTouchMappedCutShort: reading a mapped file that was cut short under the mapping (SIGBUS)
// is an error of a damaged entry, not the end of the process.
func TestTouchMappedCutShort(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 3*4096), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 3*4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := os.Truncate(p, 4096); err != nil {
		t.Fatal(err)
	}
	var sum byte
	err = touchMapped(func() error {
		for _, b := range mem {
			sum += b
		}
		return nil
	})
	if !errors.Is(err, errFault) {
		t.Errorf("reading past the end of a file cut short under its mapping: %v, want a fault", err)
	}
}

// flip changes two bytes of the file at path in place, past an entry's header.
func flip(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 2)
	if _, err := f.ReadAt(b, headerSize+1000); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^b[0], ^b[1]}, headerSize+1000); err != nil {
		t.Fatal(err)
	}
}

// TestCloseStuckWriter: a writer stuck on a disk that does not answer holds Close only for a
// bounded time: Close warns, gives up, and says what is stuck. The writer, once the disk
// answers, finishes the entry it was writing and lets the directory go.
func TestCloseStuckWriter(t *testing.T) {
	dir := t.TempDir()
	tr := open(t, diskstore.Zstd, dir, 1<<30, nil)
	tr.closeWarn = 10 * time.Millisecond
	held, hold := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tr.beforeWrite = func() { // the disk stops answering once the first entry is on its way
		once.Do(func() { close(held) })
		<-hold
	}
	for i := range 3 {
		if !tr.Put(key(i), i, sample(i)) {
			t.Fatalf("entry %d not queued", i)
		}
	}
	<-held
	closed := make(chan error, 1)
	go func() { closed <- tr.Close() }()
	select {
	case err := <-closed:
		if err == nil || !strings.Contains(err.Error(), "writer is stuck") || !strings.Contains(err.Error(), key(0).String()) {
			t.Errorf("Close with the writer stuck: %v; want an error saying the writer is stuck, on entry %s", err, key(0))
		}
	case <-time.After(30 * time.Second): // a guard, far above the bound (a few closeWarns)
		t.Errorf("Close has not returned 30 s after it began, with its writer stuck: it waits for the disk forever")
		close(hold)
		<-closed
		return
	}
	close(hold) // the disk answers: the writer writes entry 0, drops the rest, and ends
	<-tr.w.Done()
	tr = open(t, diskstore.Zstd, dir, 1<<30, nil) // the directory was let go
	defer tr.Close()
	if !tr.Has(key(0)) || tr.Has(key(1)) || tr.Has(key(2)) {
		t.Errorf("after the stuck Close: entries 0, 1, 2 on disk: %v %v %v; want the one being written only", tr.Has(key(0)), tr.Has(key(1)), tr.Has(key(2)))
	}
}

// TestUnlinkWithoutLock: an entry's file is unlinked without the tier's lock held, so that a disk
// slow to unlink (here, an unlink held until the test lets it go) holds up no reader: an evicted
// entry's, unlinked by the writer, and a damaged one's, unlinked by the reader that found it.
func TestUnlinkWithoutLock(t *testing.T) {
	dir := t.TempDir()
	probe := open(t, diskstore.None, dir, 1<<30, nil)
	probe.Put(key(0), 0, sample(0))
	probe.Flush()
	one := probe.Stats().Bytes
	probe.Close()
	os.RemoveAll(dir)

	tr := open(t, diskstore.None, dir, 2*one+one/2, nil) // room for 2
	defer tr.Close()
	entered, hold := make(chan string, 4), make(chan struct{})
	tr.unlink = func(name string) error {
		entered <- name
		<-hold
		return os.Remove(name)
	}
	// answers says whether the tier answers a reader while an unlink is held.
	answers := func(what string) bool {
		done := make(chan struct{})
		go func() { tr.Stats(); tr.Has(key(9)); close(done) }()
		select {
		case <-done:
			return true
		case <-time.After(30 * time.Second): // a guard: the calls take microseconds
			t.Errorf("%s: the tier has not answered Stats and Has in 30 s while an unlink is held: it unlinks under its lock", what)
			return false
		}
	}
	for i := range 3 {
		tr.Put(key(i), i, sample(i))
	}
	<-entered // the writer evicts entry 0 to make room for entry 2
	ok := answers("evicting")
	hold <- struct{}{}
	tr.Flush()
	if !ok {
		close(hold)
		return
	}
	if tr.Has(key(0)) || !tr.Has(key(1)) || !tr.Has(key(2)) {
		t.Fatalf("entries 0, 1, 2 held: %v %v %v; want 1 and 2", tr.Has(key(0)), tr.Has(key(1)), tr.Has(key(2)))
	}
	flip(t, tr.path(key(1)))
	got := make(chan bool)
	go func() { got <- ways[0].read(tr, key(1), 1, make([]byte, sampleBytes)) }()
	<-entered // the reader drops the damaged entry 1
	ok = answers("dropping a damaged entry")
	close(hold)
	if <-got {
		t.Error("damaged entry 1 served")
	}
	if _, err := os.Stat(tr.path(key(1))); ok && !os.IsNotExist(err) {
		t.Errorf("damaged entry 1 left on disk: %v", err)
	}
}
