package tier

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// FuzzEntry: whatever bytes lie in an entry's file (the disk hands back anything: torn, cut
// short, another version's, made up), reading it with Get and Map neither panics nor serves
// bytes the file does not vouch for: a hit is an entry whose header names the key and the
// sample's length and whose checksum holds, and Get and Map serve the same bytes. The seeds are
// sound entries of every codec and of the format before codecs, for samples of n bytes.
func FuzzEntry(f *testing.F) {
	const n = 3000
	raw := sample(1)[:n]
	for _, c := range Codecs {
		dir := f.TempDir()
		tr, err := Open(Options{Dir: dir, MaxBytes: 1 << 30, Codec: c})
		if err != nil {
			f.Fatal(err)
		}
		tr.Put(key(1), 1, raw)
		tr.Flush()
		b, err := os.ReadFile(tr.path(key(1)))
		tr.Close()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(n))
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		f.Fatal(err)
	}
	legacy := enc.EncodeAll(raw, make([]byte, legacyHeaderSize))
	enc.Close()
	k := key(1)
	copy(legacy, legacyMagic)
	copy(legacy[8:40], k[:])
	binary.LittleEndian.PutUint64(legacy[40:48], uint64(n))
	binary.LittleEndian.PutUint32(legacy[48:52], crc32.Checksum(raw, castagnoli))
	binary.LittleEndian.PutUint32(legacy[52:56], uint32(len(legacy)-legacyHeaderSize))
	f.Add(legacy, uint16(n))
	f.Add([]byte(magic), uint16(n))
	f.Add([]byte{}, uint16(0))

	tr, err := Open(Options{Dir: f.TempDir(), MaxBytes: 1 << 40, Codec: diskstore.None})
	if err != nil {
		f.Fatal(err)
	}
	defer tr.Close()
	path := tr.path(k)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got := make([][]byte, 0, 2)
		for _, w := range ways {
			tr.mu.Lock() // the entry, as Open finds it on disk
			tr.forget(k)
			tr.entries[k] = &entry{key: k, tag: -1, size: int64(len(data))}
			tr.evict.Add(k, -1)
			tr.bytes += int64(len(data))
			tr.mu.Unlock()
			dst := make([]byte, n)
			if !w.read(tr, k, 1, dst) {
				continue
			}
			h, err := parseHeader(data, int64(len(data)), k, int(n))
			if err != nil {
				t.Fatalf("%s served an entry whose header is bad: %v", w.name, err)
			}
			if !h.legacy && crc32.Update(crc32.ChecksumIEEE(data[:60]), crc32.IEEETable, data[h.size:]) != h.sum {
				t.Fatalf("%s served an entry whose checksum does not hold", w.name)
			}
			if h.legacy && crc32.Checksum(dst, castagnoli) != h.sum {
				t.Fatalf("%s served bytes whose checksum does not hold (format before codecs)", w.name)
			}
			if h.codec == diskstore.None && !bytes.Equal(dst, data[h.size:]) {
				t.Fatalf("%s served other bytes than the entry stored as it is", w.name)
			}
			got = append(got, dst)
		}
		if len(got) == 2 && !bytes.Equal(got[0], got[1]) {
			t.Fatal("Get and Map served different bytes")
		}
	})
}
