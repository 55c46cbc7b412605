package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vidfs/vidfs/internal/wire"
)

// TestBenchAndStats: vidfs bench reads every sample in each pattern without errors, and vidfs
// stats reports what happened.
func TestBenchAndStats(t *testing.T) {
	mp := startMount(t, makeSource(t), "--cache-mem", "16MiB", "--workers", "2", "--size", "32x32", "--probe-cache", "")
	lay, err := readDataset(mp.dir)
	if err != nil {
		t.Fatal(err)
	}
	n := lay.Samples
	for _, pattern := range []string{"plan", "seq", "random"} {
		code, out, errs := vidfs(t, "bench", mp.dir, "--pattern", pattern, "--duration", "0", "--jobs", "3")
		want := fmt.Sprintf("read: %d clips in", n)
		if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "errors: 0") || !strings.Contains(out, "lat (ms): p50=") {
			t.Errorf("bench --pattern %s: exit %d, %s%s; want %q, no errors", pattern, code, out, errs, want)
		}
	}
	code, out, errs := vidfs(t, "stats", mp.dir)
	for _, want := range []string{fmt.Sprintf("position %d of %d", n, n), "hit rate", "frames decoded per frame served",
		"latency p50", fmt.Sprintf("samples  %d of", n), "bad/empty.mp4 (whole video): "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("vidfs stats: exit %d, no %q in\n%s%s", code, want, out, errs)
		}
	}
	code, out, _ = vidfs(t, "stats", "--json", mp.dir)
	var st wire.Stats
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Plan.Length != n || st.Reads.Accesses < int64(3*n) {
		t.Errorf("stats --json: exit %d, %v, %+v", code, err, st.Plan)
	}
	if code, _, errs := vidfs(t, "stats", t.TempDir()); code != 1 || !strings.Contains(errs, "is not a vidfs mount") {
		t.Errorf("stats of a plain directory: exit %d, %s", code, errs)
	}
}

// TestMetrics scrapes --metrics-addr and finds the counters .vidfs/stats shows.
func TestMetrics(t *testing.T) {
	mp := startMount(t, makeSource(t), "--cache-mem", "16MiB", "--workers", "2", "--size", "32x32", "--probe-cache", "",
		"--metrics-addr", "127.0.0.1:0")
	url := regexp.MustCompile(`url=(http://\S+/metrics)`).FindStringSubmatch(mp.log())
	if url == nil {
		t.Fatalf("no metrics address logged:\n%s", mp.log())
	}
	if code, out, errs := vidfs(t, "bench", mp.dir, "--pattern", "plan", "--duration", "0"); code != 0 {
		t.Fatalf("bench: %s%s", out, errs)
	}
	st, err := readStats(mp.dir)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := http.Get(strings.TrimSuffix(url[1], "/metrics") + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		t.Fatal(err)
	}
	dump, _ := io.ReadAll(prof.Body)
	prof.Body.Close()
	if prof.StatusCode != http.StatusOK || !strings.Contains(string(dump), "goroutine ") {
		t.Errorf("goroutine profile: %s, %.200s", prof.Status, dump)
	}
	resp, err := http.Get(url[1])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	value := func(name string) float64 {
		f, ok := families[name]
		if !ok || len(f.Metric) == 0 {
			t.Fatalf("no %s in the scrape", name)
		}
		m := f.Metric[0]
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
		return 0
	}
	for name, want := range map[string]float64{
		"vidfs_samples": float64(st.Samples), "vidfs_plan_length": float64(st.Plan.Length), "vidfs_plan_position": float64(st.Plan.Position),
		"vidfs_cache_hits_total": float64(st.Cache.Hits), "vidfs_cache_misses_total": float64(st.Cache.Misses),
		"vidfs_decode_clips_total": float64(st.Decode.Clips), "vidfs_cache_capacity_bytes": float64(st.Cache.CapacityBytes),
	} {
		if got := value(name); got != want {
			t.Errorf("%s = %v, .vidfs/stats says %v", name, got, want)
		}
	}
	if value("vidfs_read_requests_total") < float64(st.Samples) || value("vidfs_read_wait_seconds_total") <= 0 {
		t.Errorf("read counters: %v requests, %v s waited", value("vidfs_read_requests_total"), value("vidfs_read_wait_seconds_total"))
	}
	h := families["vidfs_read_latency_seconds"]
	if h == nil || len(h.Metric) != 1 || h.Metric[0].Histogram == nil {
		t.Fatalf("no read latency histogram: %v", h)
	}
	hist := h.Metric[0].Histogram
	last := hist.Bucket[len(hist.Bucket)-1]
	if float64(hist.GetSampleCount()) < value("vidfs_read_requests_total") || hist.GetSampleSum() <= 0 ||
		len(hist.Bucket) < 10 || last.GetCumulativeCount() != hist.GetSampleCount() {
		t.Errorf("read latency histogram: %d observations, sum %v s, %d buckets (last %v); %v read requests",
			hist.GetSampleCount(), hist.GetSampleSum(), len(hist.Bucket), last, value("vidfs_read_requests_total"))
	}
}

// TestTop drives vidfs top in a tmux pane while a reader works, and reads the screen.
func TestTop(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is needed for this test (apt-get install tmux)")
	}
	mp := startMount(t, makeSource(t), "--cache-mem", "16MiB", "--workers", "2", "--size", "32x32", "--probe-cache", "")
	session := "vidfs-top-" + strconv.Itoa(os.Getpid())
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	exe, _ := os.Executable()
	tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "30", "env", "VIDFS_TEST_MAIN=1", exe, "top", mp.dir)
	defer exec.Command("tmux", "kill-session", "-t", session).Run()
	screen := func() string { return tmux("capture-pane", "-p", "-t", session) }

	waitScreen := func(what string, ok func(string) bool) string {
		var s string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if s = screen(); ok(s) {
				return s
			}
		}
		t.Fatalf("vidfs top never showed %s; the screen:\n%s", what, s)
		return s
	}
	s := waitScreen("its dashboard", func(s string) bool { return strings.Contains(s, "hit rate") && strings.Contains(s, "plan") })
	for _, want := range []string{"vidfs top", "scan", "probed in", "cache", "[", "ahead", "decode", "readers", "latency", "none: write the order"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q on the screen:\n%s", want, s)
		}
	}
	lay, _ := readDataset(mp.dir)
	if code, out, errs := vidfs(t, "bench", mp.dir, "--pattern", "plan", "--duration", "0"); code != 0 {
		t.Fatalf("bench: %s%s", out, errs)
	}
	want := fmt.Sprintf("position %d / %d", lay.Samples, lay.Samples)
	waitScreen(want, func(s string) bool { return strings.Contains(s, want) })
	tmux("send-keys", "-t", session, "q")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if exec.Command("tmux", "has-session", "-t", session).Run() != nil {
			break // the program quit and the session closed with it
		}
		if time.Now().After(deadline) {
			t.Fatalf("vidfs top did not quit on q:\n%s", screen())
		}
	}
	// Without a terminal it says what to use instead.
	if code, _, errs := vidfs(t, "top", mp.dir); code == 0 || !strings.Contains(errs, "vidfs stats "+mp.dir) {
		t.Errorf("vidfs top into a pipe: exit %d, %s", code, errs)
	}
}
