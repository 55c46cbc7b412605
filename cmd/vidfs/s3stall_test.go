//go:build vidfstest

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vidfs/vidfs/internal/wire"
)

// TestS3StallIsNoCrash: the S3 server stopped for 40 s, longer than --decode-deadline and
// --s3-timeout (at least three reads that wait it out, where two decodes killed as hung would
// hold the video), under a mount whose decoders are helpers: the samples read meanwhile fail with
// EIO, a transient error (each wait ends in the object store's own timeout, which the decode
// deadline does not count), no helper is killed as hung, no video is held, and once the server is
// back the same samples read as on local disk.
func TestS3StallIsNoCrash(t *testing.T) {
	s, p := bucketSource(t)
	local := startMount(t, makeSource(t), smallMount...)
	want, _ := samplesOf(t, local.dir, nil, false)
	m := probedMount(t, p, "--s3-timeout", "6s", "--decode-deadline", "2s")
	stalled := samplesOfVideo(t, m.dir, "walk/gop250.mp4") // none of its bytes fetched yet

	s.Stop()
	reads := 0
	for end := time.Now().Add(40 * time.Second); time.Now().Before(end); reads++ {
		i := stalled[reads%len(stalled)]
		_, failed := samplesOf(t, m.dir, []int{i}, false)
		if !errors.Is(failed[i], syscall.EIO) {
			t.Fatalf("sample %d read with the server stopped: %v, want EIO", i, failed[i])
		}
	}
	s.Restart()
	if reads < 3 {
		t.Fatalf("%d reads during the stall: too few to tell a stall from a hang", reads)
	}
	got, failed := samplesOf(t, m.dir, stalled, false)
	if len(failed) > 0 {
		t.Fatalf("after the server came back: %v\n%s", failed, m.log())
	}
	for _, i := range stalled {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("sample %d differs from the local mount's after the stall", i)
		}
	}
	var st wire.Stats
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(m.dir, ".vidfs/stats"))), &st); err != nil {
		t.Fatal(err)
	}
	h := st.Decode.Helpers
	t.Logf("%d reads failed during the stall; helpers %+v", reads, h)
	if h == nil || h.Hangs != 0 || h.Crashes != 0 || h.VideosHeld != 0 {
		t.Errorf("helper stats %+v: a stalled source hung, crashed or held a video", h)
	}
	m.checkNoCrash(t)
}
