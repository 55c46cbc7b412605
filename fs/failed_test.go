package fs

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/vidfs/vidfs/decode"
)

// failedSamples is what each record of f says failed: the rows of .vidfs/failed, the samples the
// cache fails at once, and the samples of the problems in the stats; and the stats' failed count.
func failedSamples(t *testing.T, f *FS) (rows, cached, problems []int, count int64) {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(f.failedCSV())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[1:] {
		n, err := strconv.Atoi(r[0])
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, n)
	}
	for s := range f.lay.Len() {
		if f.cache.Failed(s) != nil {
			cached = append(cached, s)
		}
	}
	st := f.Stats()
	for _, p := range st.Errors {
		if p.Sample >= 0 {
			problems = append(problems, p.Sample)
		}
	}
	slices.Sort(problems)
	return rows, cached, problems, st.Decode.Failed
}

// TestFailureOneRecord: which samples failed, and why, is one fact, and every report of it says
// the same: .vidfs/failed, the cache, the stats' failed count and its problems, also after a
// read that met something other than a failed decode (the cache closed, as at an unmount).
func TestFailureOneRecord(t *testing.T) {
	bad := fmt.Errorf("%w: made up", decode.ErrCorrupt)
	f, _ := fakeFSWith(t, 40, 1, map[string]error{"a/two.mp4": bad}, OnErrorZeros)
	first, _ := f.lay.VideoSamples(1)
	hdr, S := int64(len(f.lay.NpyHeader())), int(f.lay.Spec.SampleBytes())
	check := func(when string) {
		t.Helper()
		rows, cached, problems, count := failedSamples(t, f)
		want := []int{first}
		if !slices.Equal(rows, want) || !slices.Equal(cached, want) || !slices.Equal(problems, want) || count != 1 {
			t.Errorf("%s: .vidfs/failed lists %v, the cache fails %v, the problems name %v, the stats count %d; want sample %d alone",
				when, rows, cached, problems, count, first)
		}
	}
	if b, errno := readAt(t, f, hdr+int64(first*S), S); errno != 0 || !bytes.Equal(b, make([]byte, S)) {
		t.Fatalf("the failed sample under zeros: %v", errno)
	}
	check("after a failed sample was read")
	f.Close() // as an unmount does, while a reader reads on
	readAt(t, f, hdr, S)
	check("after a read of sample 0 met the closed cache")
}
