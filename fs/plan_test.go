package fs

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

// reader is a trainer-like client: it shuffles the samples, writes the order to .vidfs/order
// (with "plan"), and reads every sample in that order. The decoders, not a clock, set its pace:
// it reads the k-th sample once the plan's next sample is ready, once the decoders have nothing
// left to do, or once they have made HEAD + k*PER decodes since it started (a trainer that builds
// its model meanwhile, then spends on each sample what the decoders spend on PER). So a slow
// machine slows the reader as much as the decoders, and a sample not ready in its turn is one the
// cache did not decode ahead in plan order.
const reader = `
import json, os, random, sys, time
import numpy as np
mnt, mode, how, head, per = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
lay = json.load(open(os.path.join(mnt, ".vidfs/layout.json")))
n, S = lay["samples"], lay["sample_bytes"]
def stats():
    with open(os.path.join(mnt, ".vidfs/stats")) as f:
        return json.load(f)
def pace(k, base):
    while True:
        st = stats()
        d = st["decode"]
        if st["plan"]["ready_ahead"] > 0 or d["in_flight"] + d["queued"] == 0 or d["clips"] - base >= head + per * k:
            return
        time.sleep(0.002)
order = list(range(n))
random.Random(5).shuffle(order)
base = stats()["decode"]["clips"]
if mode == "plan":
    with open(os.path.join(mnt, ".vidfs/order"), "w") as f:
        f.write(" ".join(map(str, order)) + "\n")
a = np.load(os.path.join(mnt, "clips.npy"), mmap_mode="r")
fd = os.open(os.path.join(mnt, "clips.raw"), os.O_RDONLY)
for k, i in enumerate(order):
    pace(k, base)
    if how == "pread":
        b = os.pread(fd, S, i * S)
        assert len(b) == S
    else:
        x = np.array(a[i])
st = stats()
print(json.dumps({"hit_rate": st["cache"]["hit_rate"], "hits": st["cache"]["hits"], "misses": st["cache"]["misses"],
                  "wait_s": st["reads"]["wait_s"], "position": st["plan"]["position"], "length": st["plan"]["length"],
                  "off_plan": st["plan"]["off_plan_reads"], "amplification": st["decode"]["amplification"],
                  "decodes": st["decode"]["clips"] - base}))
`

type readerResult struct {
	HitRate       float64 `json:"hit_rate"`
	Hits, Misses  int64
	WaitS         float64 `json:"wait_s"`
	Position      int
	Length        int
	OffPlan       int64   `json:"off_plan"`
	Amplification float64 `json:"amplification"`
	Decodes       int64
}

// TestPlanGivesHits: a reader that writes a shuffled plan and reads at a pace the decoders keep
// up with (a head start of 30 decodes, then 2 decodes a sample: the 0.3 s and 20 ms a sample this
// test once slept, at the 100 decodes a second of a busy 2-core machine under -race) finds
// (nearly) every sample ready; the same reader without a plan waits for each.
func TestPlanGivesHits(t *testing.T) {
	// 32x32x4x3 = 12 KiB: samples on page boundaries, so memory-mapped reads stay in their sample.
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 8, Height: 32, Width: 32, PadShort: true}
	for _, tc := range []struct{ mode, how string }{{"plan", "pread"}, {"plan", "mmap"}, {"none", "pread"}} {
		t.Run(tc.mode+"/"+tc.how, func(t *testing.T) {
			tm := mountVideos(t, mountSetup{files: allGood, spec: spec, workers: 2})
			var r readerResult
			if err := json.Unmarshal([]byte(tm.python(t, reader, tc.mode, tc.how, "30", "2")), &r); err != nil {
				t.Fatal(err)
			}
			n := tm.lay.Len()
			t.Logf("%d samples, %s reader, plan %s: hit rate %.3f (%d hits, %d misses), waited %.3f s, %d decodes, decode amplification %.2f",
				n, tc.how, tc.mode, r.HitRate, r.Hits, r.Misses, r.WaitS, r.Decodes, r.Amplification)
			if r.Hits+r.Misses != int64(n) {
				t.Errorf("%d accesses counted for %d samples read", r.Hits+r.Misses, n)
			}
			if tc.mode == "plan" {
				if r.HitRate < 0.95 {
					t.Errorf("hit rate %.3f with a plan, want at least 0.95", r.HitRate)
				}
				if r.Position != n || r.Length != n || r.OffPlan != 0 {
					t.Errorf("plan position %d of %d, %d reads off plan; want the end, none off", r.Position, r.Length, r.OffPlan)
				}
			} else if r.HitRate > 0.2 {
				t.Errorf("hit rate %.3f without a plan: want mostly misses", r.HitRate)
			}
		})
	}
}

// TestFio: fio's random whole-sample reads of clips.raw, 4 jobs, finish without errors.
func TestFio(t *testing.T) {
	tm := mountVideos(t, mountSetup{files: allGood, spec: layout.Spec{Frames: 4, Stride: 1, Step: 6, Height: 32, Width: 32, PadShort: true}, cacheBytes: 4 << 20})
	S := tm.lay.Spec.SampleBytes()
	for _, engine := range []string{"psync", "mmap"} {
		out, err := exec.Command("fio", "--name=samples", "--filename="+filepath.Join(tm.dir, "clips.raw"), "--readonly",
			"--rw=randread", "--bs="+itoa(int(S)), "--numjobs=4", "--ioengine="+engine, "--output-format=json",
			"--loops=2").Output()
		if err != nil {
			t.Fatalf("fio (%s): %v\n%s", engine, err, out)
		}
		var res struct {
			Jobs []struct {
				Error int
				Read  struct {
					IOBytes int64 `json:"io_bytes"`
				}
			}
		}
		if err := json.Unmarshal(out[strings.Index(string(out), "{"):], &res); err != nil {
			t.Fatalf("fio output: %v\n%s", err, out)
		}
		if len(res.Jobs) != 4 {
			t.Fatalf("fio ran %d jobs", len(res.Jobs))
		}
		for i, j := range res.Jobs {
			if j.Error != 0 || j.Read.IOBytes != 2*rawSize(tm.lay) {
				t.Errorf("fio %s job %d: error %d, read %d bytes of %d", engine, i, j.Error, j.Read.IOBytes, 2*rawSize(tm.lay))
			}
		}
	}
	st := tm.stats(t)
	t.Logf("after fio: %d requests, %d accesses, hit rate %.2f, %d evicted, cache %d of %d samples",
		st.Reads.Requests, st.Reads.Accesses, st.Cache.HitRate, st.Cache.Evicted, st.Cache.UsedSamples, st.Cache.CapacitySamples)
	if st.Cache.UsedSamples > st.Cache.CapacitySamples || len(st.Errors) != 0 {
		t.Errorf("cache over its bound or errors: %+v", st)
	}
}

// TestDamagedVideos: the corrupt, truncated, empty and random-bytes videos fail only their own
// samples, with EIO and a logged reason; everything else keeps being served.
func TestDamagedVideos(t *testing.T) {
	tm := mountVideos(t, mountSetup{spec: layout.Spec{Frames: 4, Stride: 1, Step: 4, Height: 32, Width: 32}, files: map[string]string{
		"good/a.mp4": "h264_gop16.mp4", "bad/corrupt.mp4": "corrupt.mp4", "bad/truncated.mp4": "truncated.mp4",
		"bad/empty.mp4": "empty.mp4", "bad/random.mp4": "random.mp4",
	}, helpers: true})
	failed := 0
	for pass := range 2 {
		for i := range tm.lay.Len() {
			got, err := os.ReadFile(filepath.Join(tm.dir, "samples", sampleName(tm.lay, i)+".raw"))
			s := tm.lay.Sample(i)
			sp := tm.lay.Spec
			want := make([]byte, sp.SampleBytes())
			_, derr := decode.DecodeClip(t.Context(), tm.fs.cfg.Infos.(load.InfoList)[s.Video], decode.Clip{Start: s.Start, Frames: sp.Frames, Stride: sp.Stride},
				decode.Output{Width: sp.Width, Height: sp.Height}, want, 1)
			switch {
			case derr != nil && !errorsIsEIO(err):
				t.Errorf("sample %d (%s): decode fails (%v) but the read gave %v", i, sampleName(tm.lay, i), derr, err)
			case derr == nil && err != nil:
				t.Errorf("sample %d (%s): %v", i, sampleName(tm.lay, i), err)
			case derr == nil && sha(got) != sha(want):
				t.Errorf("sample %d (%s): wrong bytes", i, sampleName(tm.lay, i))
			case derr != nil && pass == 0:
				failed++
			}
		}
	}
	st := tm.stats(t)
	files := map[string]bool{}
	for _, p := range st.Errors {
		files[p.File] = true
		if p.Reason == "" || (p.Sample < 0) != (p.File == "bad/empty.mp4" || p.File == "bad/random.mp4") {
			t.Errorf("error record %+v", p)
		}
	}
	t.Logf("%d samples, %d failed; errors reported for %v", tm.lay.Len(), failed, files)
	if failed == 0 || !files["bad/corrupt.mp4"] || !files["bad/truncated.mp4"] || !files["bad/empty.mp4"] || !files["bad/random.mp4"] || files["good/a.mp4"] {
		t.Errorf("want failures reported for each damaged video and none for the good one; got %v", files)
	}
	if len(st.Errors) != failed+2 {
		t.Errorf("%d error records for %d failed samples and 2 unreadable videos (each failure logged once)", len(st.Errors), failed)
	}
}

func errorsIsEIO(err error) bool {
	pe, ok := err.(*os.PathError)
	return ok && pe.Err == syscall.EIO
}

// TestOrderFile: plans are set, appended and read back; invalid ones are refused whole with
// EINVAL and leave the plan in force.
func TestOrderFile(t *testing.T) {
	tm := mountVideos(t, mountSetup{files: map[string]string{"a/x.mp4": "h264_gop16.mp4", "b/y.mkv": "hevc.mkv"},
		spec: layout.Spec{Frames: 4, Stride: 1, Height: 16, Width: 16}})
	n := tm.lay.Len() // 25 + 15
	out := tm.python(t, `
import errno, os, sys
import numpy as np
order = os.path.join(sys.argv[1], ".vidfs", "order")
def write(path, data, mode="w"):
    try:
        with open(path, mode + ("b" if isinstance(data, bytes) else "")) as f:
            f.write(data)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def plan():
    return open(order).read().split()
print(write(order, "3 1 2\n0"), plan())
print(write(order, "5 6", "a"), plan())
print(write(order, "1 2 x"), plan())
print(write(order, "1 %d" % int(sys.argv[2])), plan())
print(write(order, "-1"), plan())
print(write(order, "7 7", "a"), write(order, "8 nine", "a"), plan())
with open(os.path.join(sys.argv[1], ".vidfs", "order.npy"), "wb") as f:
    np.save(f, np.array([4, 2, 0], dtype=np.int64))
print("npy", plan())
buf = __import__("io").BytesIO(); np.save(buf, np.array([1.5]))
print(write(order, buf.getvalue()), plan())
print(write(order, " ".join(["1"] * 3000000)), len(plan()))
print(write(order, "1 " * 12000000), len(plan()))
print(write(order, ""), plan())
`, itoa(n))
	want := strings.Join([]string{
		"ok ['3', '1', '2', '0']",
		"ok ['3', '1', '2', '0', '5', '6']",
		"EINVAL ['3', '1', '2', '0', '5', '6']",
		"EINVAL ['3', '1', '2', '0', '5', '6']",
		"EINVAL ['3', '1', '2', '0', '5', '6']",
		"ok EINVAL ['3', '1', '2', '0', '5', '6', '7', '7']",
		"npy ['4', '2', '0']",
		"EINVAL ['4', '2', '0']",
		"EINVAL 3", // more than 64 epochs
		"EFBIG 3",  // more bytes than any valid plan
		"ok []",
	}, "\n")
	if strings.TrimSpace(out) != want {
		t.Errorf("order file session:\n%s\nwant:\n%s", out, want)
	}
	st := tm.stats(t)
	refused := 0
	for _, p := range st.Errors {
		if strings.HasPrefix(p.Reason, "plan refused") && p.File == ".vidfs/order" {
			refused++
		}
	}
	if refused != 7 || st.Plan.Length != 0 {
		t.Errorf("%d refusals reported, plan length %d; want 7 and 0", refused, st.Plan.Length)
	}
}

// mmapHashes reads every sample of clips.npy through np.load(mmap_mode="r") and prints each one's
// SHA-256, then .vidfs/failed. A failed sample's read under EIO would raise SIGBUS and kill it.
const mmapHashes = `
import hashlib, os, sys
import numpy as np
a = np.load(os.path.join(sys.argv[1], "clips.npy"), mmap_mode="r")
for i in range(len(a)):
    print(i, hashlib.sha256(np.array(a[i]).tobytes()).hexdigest())
print(open(os.path.join(sys.argv[1], ".vidfs", "failed")).read(), end="")
`

// TestOnErrorSubstituteMmap: over damaged videos, a memory-mapped reader of clips.npy reads every
// sample under --on-error substitute; .vidfs/failed lists exactly the samples an EIO mount fails,
// and every other sample is what the EIO mount serves, byte for byte.
func TestOnErrorSubstituteMmap(t *testing.T) {
	files := map[string]string{"good/a.mp4": "h264_gop16.mp4", "bad/corrupt.mp4": "corrupt.mp4", "bad/truncated.mp4": "truncated.mp4",
		"bad/b.mp4": "h264_gop250.mp4"}
	spec := layout.Spec{Frames: 4, Stride: 1, Step: 4, Height: 32, Width: 32} // 12 KiB: samples on page boundaries
	eio := mountVideos(t, mountSetup{files: files, spec: spec})
	sub := mountVideos(t, mountSetup{files: files, spec: spec, onError: OnErrorSubstitute})

	fd, err := os.Open(filepath.Join(eio.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	S := eio.lay.Spec.SampleBytes()
	want := map[int]string{}
	var failed []int
	buf := make([]byte, S)
	for i := range eio.lay.Len() {
		if _, err := fd.ReadAt(buf, int64(i)*S); err != nil {
			failed = append(failed, i)
			continue
		}
		want[i] = sha(buf)
	}
	if len(failed) == 0 {
		t.Fatal("no sample of the damaged videos fails: regenerate testdata")
	}

	out := sub.python(t, mmapHashes)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	n := sub.lay.Len()
	if len(lines) < n+1 {
		t.Fatalf("the reader stopped early:\n%s", out)
	}
	for _, l := range lines[:n] {
		var i int
		var h string
		fmt.Sscan(l, &i, &h)
		if w, ok := want[i]; ok && h != w {
			t.Errorf("sample %d differs from the EIO mount's", i)
		}
	}
	var listed []int
	for _, row := range lines[n+1:] { // after the CSV's header
		f := strings.Split(row, ",")
		i, _ := strconv.Atoi(f[0])
		listed = append(listed, i)
		if served := f[len(f)-1]; served == "EIO" || served == "" {
			t.Errorf(".vidfs/failed row %q: nothing served", row)
		}
	}
	if fmt.Sprint(listed) != fmt.Sprint(failed) {
		t.Errorf(".vidfs/failed lists %v; the EIO mount fails %v", listed, failed)
	}
	if st := sub.stats(t); st.Reads.Substituted == 0 {
		t.Errorf("no substitution counted: %+v", st.Reads)
	}
}
