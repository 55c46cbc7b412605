package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/internal/testvideo"
)

// nodesSource is 48 videos of 60 frames, 16 of each of three codecs, in 4 classes.
func nodesSource(t *testing.T) string {
	src := t.TempDir()
	for i := range 48 {
		name := []string{"hevc.mkv", "vp9.webm", "mpeg4.avi"}[i%3]
		p := filepath.Join(src, fmt.Sprintf("c%d", i%4), fmt.Sprintf("v%02d%s", i, filepath.Ext(name)))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(testvideo.Path(name), p); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// nodesRun is what testdata/nodes.py prints.
type nodesRun struct {
	Epochs []struct {
		Epoch   int   `json:"epoch"`
		Read    []int `json:"read"`
		Decoded []int `json:"decoded"`
	} `json:"epochs"`
	Videos []int   `json:"videos"`
	Moved  float64 `json:"moved_2_to_3"`
	Node0  []int   `json:"node0"`
	// Node0Samples are the samples of node 0's videos; HostA and HostASamples the same of the
	// node named hostA, under placement="host" with nodes hostB and hostA.
	Node0Samples []int `json:"node0_samples"`
	HostA        []int `json:"host_a"`
	HostASamples []int `json:"host_a_samples"`
}

// runNodes runs testdata/nodes.py with args and decodes what it prints.
func runNodes(t *testing.T, args ...string) nodesRun {
	t.Helper()
	out := runPython(t, "nodes.py", args...)
	var r nodesRun
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("nodes.py: %v\n%s", err, out)
	}
	return r
}

// TestNodePlacement: two nodes, each a mount with its own training copy (--copy-fill videos),
// two ranks each, PlanSampler(placement="node") with random clips for 4 epochs. Each node's copy
// holds at most 0.55 of the frames of one node's copy of everything; epochs 2-4 decode at most
// 5 % of their clips on each node; the ranks read every video's clips (nodes.py checks the
// split); the job restarted decodes nothing; 2 to 3 nodes moves at most 40 % of the videos; and
// vidfs copy --nodes fills exactly the videos the sampler places on the node.
func TestNodePlacement(t *testing.T) {
	t.Parallel() // it waits mostly, on its mounts' fills; its mounts and sources are its own
	src := nodesSource(t)
	// In-process decoders: where a mount decodes is nothing to the placement, and the training
	// copy's fills through helpers are TestCopyCommand's.
	flags := []string{"--frames", "4", "--stride", "2", "--step", "4", "--size", "32x32", "--workers", "2", "--probe-cache", filepath.Join(t.TempDir(), "probe"),
		"--decoders", "in-process"}
	withCopy := func(dir string, more ...string) []string {
		return append(append(append([]string{}, flags...), "--cache-dir", dir, "--cache-keep", "copy", "--cache-disk", "1GiB"), more...)
	}

	// The sampler's placement, its splits and its refusals, on a mount without a copy (the
	// samplers there write plans of their own).
	plain := startMount(t, src, flags...)
	r := runNodes(t, "checks", plain.dir)
	plain.stop(t)

	// One node's copy of everything, for the frames it holds.
	one := startMount(t, src, withCopy(t.TempDir())...)
	if code, _, stderr := vidfs(t, "copy", one.dir, "--every", "100ms"); code != 0 {
		t.Fatalf("vidfs copy: %s", stderr)
	}
	all := mountStats(t, one.dir).Copy.Frames
	one.stop(t)

	dirs := []string{t.TempDir(), t.TempDir()}
	a, b := startMount(t, src, withCopy(dirs[0], "--copy-fill", "videos")...), startMount(t, src, withCopy(dirs[1], "--copy-fill", "videos")...)
	job := runNodes(t, "job", a.dir, b.dir, "0", "4")
	for _, ep := range job.Epochs[1:] {
		for n := range 2 {
			if ep.Decoded[n]*20 > ep.Read[n] {
				t.Errorf("epoch %d, node %d: %d of %d clips decoded, want at most 5 %%", ep.Epoch+1, n, ep.Decoded[n], ep.Read[n])
			}
		}
	}
	for n, mp := range []*mountProc{a, b} {
		got := mountStats(t, mp.dir).Copy.Frames
		t.Logf("node %d: %d videos, %d frames in its copy, of %d in one node's copy", n, job.Videos[n], got, all)
		if float64(got) > 0.55*float64(all) {
			t.Errorf("node %d's copy holds %d frames, over 0.55 of one node's %d", n, got, all)
		}
	}
	if r.Moved > 0.40 {
		t.Errorf("2 to 3 nodes moves %.2f of the videos, want at most 0.40", r.Moved)
	}
	t.Logf("epochs: %+v; 2 to 3 nodes moves %.2f of the videos", job.Epochs, r.Moved)
	a.stop(t)
	b.stop(t)

	// The job restarted on the same nodes: every clip from the copy, none decoded.
	a, b = startMount(t, src, withCopy(dirs[0], "--copy-fill", "videos")...), startMount(t, src, withCopy(dirs[1], "--copy-fill", "videos")...)
	again := runNodes(t, "job", a.dir, b.dir, "4", "1")
	if d := again.Epochs[0].Decoded; d[0]+d[1] != 0 {
		t.Errorf("the job restarted: %v clips decoded, want none", d)
	}
	a.stop(t)
	b.stop(t)

	// vidfs copy --nodes fills node 0's share as the sampler places it, and nothing else; and
	// --hosts the share of the node named hostA.
	var c *mountProc
	for _, share := range []struct {
		args    []string
		of      string
		videos  []int
		samples []int
	}{
		{[]string{"--nodes", "2", "--node", "0"}, "node 0's share (2 nodes)", r.Node0, r.Node0Samples},
		{[]string{"--hosts", "hostB,hostA", "--host", "hostA"}, "node hostA's share (2 nodes)", r.HostA, r.HostASamples},
	} {
		c = startMount(t, src, withCopy(t.TempDir())...)
		code, stdout, stderr := vidfs(t, append([]string{"copy", c.dir, "--every", "100ms", "--seed", "5", "--weigh", "videos"}, share.args...)...)
		want := fmt.Sprintf("%d of %d videos of %s whole", len(share.videos), len(share.videos), share.of)
		if code != 0 || !strings.Contains(stdout, want) {
			t.Fatalf("vidfs copy %v: exit %d, stdout %q (want %q), stderr %s", share.args, code, stdout, want, stderr)
		}
		st := mountStats(t, c.dir)
		if st.Copy.Complete != len(share.videos) || st.Copy.Share == nil || st.Copy.Share.Videos != len(share.videos) {
			t.Errorf("after vidfs copy %v: %d videos whole, share %+v; the sampler places %d there", share.args, st.Copy.Complete, st.Copy.Share, len(share.videos))
		}
		_, S, f := readEvery(t, c.dir, 0) // clips.raw, open, nothing read yet
		buf := make([]byte, S)
		for _, s := range share.samples {
			if _, err := f.ReadAt(buf, int64(s)*S); err != nil {
				t.Fatalf("sample %d: %v", s, err)
			}
		}
		if st := mountStats(t, c.dir); st.Decode.Clips != 0 || st.Copy.Misses != 0 {
			t.Errorf("the share's videos read after vidfs copy %v: %d clips decoded, %d copy misses; want none", share.args, st.Decode.Clips, st.Copy.Misses)
		}
	}

	// Refused: a node out of range, no --weigh, a host not listed, both kinds of node.
	for _, args := range [][]string{{"--nodes", "2", "--node", "2", "--weigh", "videos"}, {"--nodes", "2", "--node", "0"}, {"--node", "1"},
		{"--hosts", "a,b", "--host", "c", "--weigh", "videos"}, {"--hosts", "a,b", "--nodes", "2", "--node", "0", "--weigh", "videos"}} {
		if code, _, stderr := vidfs(t, append([]string{"copy", c.dir}, args...)...); code != 2 || !strings.Contains(stderr, "--") {
			t.Errorf("vidfs copy %v: exit %d, %q; want a usage error", args, code, stderr)
		}
	}
}

// TestPlacementPython: Python's placement() gives the vectors the Go rule is pinned to
// (placement/testdata/pinned.json): unequal weights, a video without samples, one heavier than a
// node's share, numbered and named nodes, more nodes than videos.
func TestPlacementPython(t *testing.T) {
	if out := runPython(t, "pinned.py"); strings.TrimSpace(out) != "ok" {
		t.Errorf("pinned.py: %s", out)
	}
}

// TestPlacementDDP: under a real torch.distributed (gloo), four ranks as two nodes agree on the
// placement by number and by given host names, and every rank raises, none left waiting, where
// two nodes gather one host name or one rank has another seed (testdata/ddp_place.py).
func TestPlacementDDP(t *testing.T) {
	mp := startMount(t, nodesSource(t), "--frames", "4", "--stride", "2", "--step", "4", "--size", "32x32", "--probe-cache", "", "--decoders", "in-process")
	if out := runPython(t, "ddp_place.py", mp.dir, strconv.Itoa(rendezvousPort(t))); !strings.HasSuffix(strings.TrimSpace(out), "ok") {
		t.Errorf("ddp_place.py: %s", out)
	}
}
