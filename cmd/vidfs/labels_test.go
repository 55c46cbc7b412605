package main

import (
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/internal/npy"
	"github.com/vidfs/vidfs/internal/wire"
)

// labelled are the labels the tests' labels files give videos of makeSource's source, whose
// folders are other classes: a label with a comma (quoted in CSV), a video that cannot be read
// (left out whatever its label), and a path that is no video (its label still a class).
var labelled = map[string]string{
	"walk/gop16.mp4": "pour", "walk/hevc.mkv": "stir, slowly", "run/vp9.webm": "pour", "swim/odd.webm": "cut",
	"top.mp4": "stir, slowly", "bad/empty.mp4": "cut", "gone/missing.mp4": "wash",
}

// labelledClasses is classes.txt for labelled: every label, sorted.
var labelledClasses = []string{"cut", "pour", "stir, slowly", "wash"}

// TestMountLabels: with --labels, a CSV or a JSON file gives classes.txt (every label of the
// file, sorted), index.csv's label and class columns and .vidfs/labels.npy; a video the file
// does not name is left out and listed in .vidfs/stats (--unlabelled skip) or kept with label -1
// (keep); a path the file names that is no video is logged, not an error.
func TestMountLabels(t *testing.T) {
	src, probes := makeSource(t), t.TempDir()
	dir := t.TempDir()
	var csvText strings.Builder
	w := csv.NewWriter(&csvText)
	w.Write([]string{"path", "label"})
	var items []map[string]string
	for _, p := range slices.Sorted(maps.Keys(labelled)) {
		w.Write([]string{p, labelled[p]})
		items = append(items, map[string]string{"path": p, "label": labelled[p], "template": "ignored"})
	}
	w.Flush()
	csvFile, jsonFile := filepath.Join(dir, "train.csv"), filepath.Join(dir, "train.json")
	if err := os.WriteFile(csvFile, []byte(csvText.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	jsonText, err := json.MarshalIndent(items, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jsonFile, jsonText, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--frames", "4", "--size", "32x32", "--decoders", "in-process", "--probe-cache", probes}
	var readable []string // every video a mount lays out without --labels
	for p, name := range sources {
		if name != "empty.mp4" {
			readable = append(readable, p)
		}
	}
	slices.Sort(readable)
	for _, tc := range []struct {
		file, unlabelled string
		videos           []string // those laid out
	}{
		{csvFile, "skip", []string{"run/vp9.webm", "swim/odd.webm", "top.mp4", "walk/gop16.mp4", "walk/hevc.mkv"}},
		{jsonFile, "keep", readable},
	} {
		t.Run(filepath.Ext(tc.file)[1:]+"-"+tc.unlabelled, func(t *testing.T) {
			mp := startMount(t, src, append(args, "--labels", tc.file, "--unlabelled", tc.unlabelled)...)
			if got := string(readFile(t, mp.dir, "classes.txt")); got != strings.Join(labelledClasses, "\n")+"\n" {
				t.Errorf("classes.txt:\n%s\nwant %q", got, labelledClasses)
			}
			rows, err := csv.NewReader(strings.NewReader(string(readFile(t, mp.dir, "index.csv")))).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if h := strings.Join(rows[0], ","); h != "index,path,video,start,stride,label,class" {
				t.Fatalf("index.csv's header: %s", h)
			}
			labels := labelsNpy(t, mp.dir)
			if len(labels) != len(rows)-1 {
				t.Fatalf("labels.npy has %d samples, index.csv %d", len(labels), len(rows)-1)
			}
			var videos []string
			for i, row := range rows[1:] {
				video, label, class := row[2], row[5], row[6]
				if len(videos) == 0 || videos[len(videos)-1] != video {
					videos = append(videos, video)
				}
				want, named := labelled[video]
				wantLabel := slices.Index(labelledClasses, want)
				if class != want || label != strconv.Itoa(wantLabel) || labels[i] != int32(wantLabel) {
					t.Errorf("sample %d of %s: label %s, class %q, labels.npy %d; want %d, %q (named in the file: %v)", i, video, label, class, labels[i], wantLabel, want, named)
				}
			}
			if !slices.Equal(videos, tc.videos) {
				t.Errorf("videos laid out:\n %v\nwant\n %v", videos, tc.videos)
			}
			var st wire.Stats
			if err := json.Unmarshal(readFile(t, mp.dir, ".vidfs/stats"), &st); err != nil {
				t.Fatal(err)
			}
			var listed []string
			for _, p := range st.Errors {
				if strings.Contains(p.Reason, "not named in the labels file "+tc.file) {
					listed = append(listed, p.File)
				}
			}
			var unnamed []string
			if tc.unlabelled == "skip" {
				for _, p := range readable {
					if _, ok := labelled[p]; !ok {
						unnamed = append(unnamed, p)
					}
				}
			}
			if !slices.Equal(listed, unnamed) {
				t.Errorf(".vidfs/stats lists as unlabelled %v, want %v", listed, unnamed)
			}
			log := mp.log()
			wantLog := []string{`the labels file names paths that are no video under the source" file=` + tc.file + " count=1 of=7 first=gone/missing.mp4"}
			if tc.unlabelled == "skip" {
				wantLog = append(wantLog, "videos the labels file does not name are left out", "count=10 first=\"jump/av1.mp4, jump/start.ts, jump/vfr.mkv, run/mpeg4.avi, run/rotated.mp4\"")
			} else {
				wantLog = append(wantLog, "videos the labels file does not name are kept with label -1", "count=10")
			}
			for _, s := range wantLog {
				if !strings.Contains(log, s) {
					t.Errorf("the log does not say %s:\n%s", s, log)
				}
			}
		})
	}
}

// TestMountLabelsRefused: a labels file that cannot be meant stops the mount before it probes,
// with the file, the line and the reason; so does an --unlabelled that is neither skip nor keep.
func TestMountLabelsRefused(t *testing.T) {
	src, mnt, dir := makeSource(t), t.TempDir(), t.TempDir()
	for _, tc := range []struct{ name, text, want string }{
		{"dup.csv", "path,label\nwalk/gop16.mp4,pour\nrun/vp9.webm,pour\nwalk/gop16.mp4,stir\n", `line 4: walk/gop16.mp4 labelled "stir", but "pour" on line 2`},
		{"empty.csv", "walk/gop16.mp4,pour\nrun/vp9.webm,\n", "line 2: run/vp9.webm has an empty label"},
		{"bad.csv", "walk/gop16.mp4,pour\nrun/vp9.webm,\"pour\n", "line 2"},
		{"num.json", "{\"walk/gop16.mp4\": \"pour\",\n \"run/vp9.webm\": 2}", "line 2: run/vp9.webm has a label of a number, want a string"},
	} {
		file := filepath.Join(dir, tc.name)
		if err := os.WriteFile(file, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errs := vidfs(t, "mount", src, mnt, "--labels", file, "--probe-cache", "")
		if code != 1 || !strings.Contains(errs, "labels file "+file+": "+tc.want) || strings.Contains(errs, "scanned") {
			t.Errorf("%s: exit %d, %s\nwant exit 1 before the scan, saying %q", tc.name, code, errs, tc.want)
		}
	}
	if code, _, errs := vidfs(t, "mount", src, mnt, "--labels", filepath.Join(dir, "dup.csv"), "--unlabelled", "drop"); code != 2 || !strings.Contains(errs, `--unlabelled "drop": want skip or keep`) {
		t.Errorf("--unlabelled drop: exit %d, %s", code, errs)
	}
	if mounted(mnt) {
		t.Error("a mount was made")
	}
}

// labelsNpy reads MNT/.vidfs/labels.npy: int32, one per sample.
func labelsNpy(t *testing.T, mnt string) []int32 {
	t.Helper()
	b := readFile(t, mnt, ".vidfs/labels.npy")
	h, off, err := npy.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Descr != "<i4" || len(h.Shape) != 1 || len(b)-off != 4*h.Shape[0] {
		t.Fatalf("labels.npy: %+v with %d bytes of data", h, len(b)-off)
	}
	out := make([]int32, h.Shape[0])
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[off+4*i:]))
	}
	return out
}

// readFile reads the file at name under dir.
func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVerifyLabels: vidfs verify with --labels checks the samples a mount with the same flags
// serves, and lists the videos the file does not name as unlabelled, which fail nothing.
func TestVerifyLabels(t *testing.T) {
	src := linkSources(t, map[string]string{"a/x.mp4": "h264_gop16.mp4", "y.webm": "vp9.webm"})
	file := filepath.Join(t.TempDir(), "l.csv")
	if err := os.WriteFile(file, []byte("a/x.mp4,pour\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		unlabelled string
		status     map[string]string
	}{
		{"skip", map[string]string{"a/x.mp4": "ok", "y.webm": "unlabelled"}},
		{"keep", map[string]string{"a/x.mp4": "ok", "y.webm": "ok"}},
	} {
		code, out, errs := vidfs(t, "verify", src, "--labels", file, "--unlabelled", tc.unlabelled, "--frames", "4", "--size", "32x32", "--probe-cache", "", "--json")
		var rep verifyReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
			t.Fatalf("--unlabelled %s: exit %d, %v\n%s", tc.unlabelled, code, err, errs)
		}
		status, unlabelled := map[string]string{}, 0
		for _, r := range rep.Videos {
			status[r.File] = r.Status
			if r.Status == "unlabelled" {
				unlabelled++
			}
		}
		if !maps.Equal(status, tc.status) || rep.Summary.Unlabelled != unlabelled {
			t.Errorf("--unlabelled %s: %v, summary %+v; want %v", tc.unlabelled, status, rep.Summary, tc.status)
		}
	}
}
