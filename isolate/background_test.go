package isolate_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/vidfs/vidfs/isolate"
)

// TestBackground: a clip asked for as background work (decode.Clip.Background: a training copy's
// whole decode in the time the readers leave) decodes in its helper on a thread at SCHED_IDLE,
// through the sandbox's filter, to a fresh decode's bytes; the thread ends with it, so that the
// clips after it, background or not, decode as before.
func TestBackground(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 1, PerHelper: 2})
	jobs := clipsOf(t, []string{"h264_gop16.mp4", "hevc.mkv"})
	for k, j := range jobs {
		background := k%2 == 0
		want, werr := fresh(t, j)
		c := j.clip
		c.Background = background
		got := make([]byte, len(want))
		_, err := d.DecodeClip(context.Background(), j.info, c, out, got)
		if (err == nil) != (werr == nil) || err == nil && !bytes.Equal(got, want) {
			t.Errorf("%s %+v (background %v): %v, a fresh decode %v; bytes equal %v", j.info.Path, j.clip, background, err, werr, bytes.Equal(got, want))
		}
	}
	st := d.Isolation()
	want := int64((len(jobs) + 1) / 2)
	if st.Background != want || st.IdleDecodes != want {
		t.Errorf("%d clips asked for as background, %d of them at SCHED_IDLE; want %d and %d", st.Background, st.IdleDecodes, want, want)
	}
}
