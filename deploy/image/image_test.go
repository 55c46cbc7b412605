// Package image_test builds vidfs's container image (deploy/image/Dockerfile) with podman and
// runs it as the node DaemonSet does (deploy/kubernetes): one container mounts, with /dev/fuse
// and CAP_SYS_ADMIN only, on a host directory bound in with shared propagation, and other
// containers read the mount through that directory, as training pods do.
//
// By default the image holds this machine's build of vidfs (a tarball shaped as the release's)
// on a Debian 12 base made with debootstrap, whose libdav1d6 that build links; with
// VIDFS_IMAGE_RELEASE naming the release tarball (make test-image: make dist's), it holds the
// release on an Ubuntu 24.04 base, as deploy/image/Dockerfile's default base. Either base is made
// once by scripts/image.sh and kept as a local image (scripts/setup.sh test makes the Debian 12
// one). This machine's build is go build's of cmd/vidfs, or the binary VIDFS_IMAGE_BINARY names
// (make test's, built from the same tree just before the tests). Skipped, saying so, without
// podman.
package image_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vidfs/vidfs/internal/s3test"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// mountFlags are the flags of every mount here: small samples, a cache that holds them all,
// zeros for samples that fail (the bundled damaged videos), CPU decoding whatever the host has.
var mountFlags = []string{"--frames", "8", "--stride", "2", "--size", "128x128", "--cache-mem", "256MiB",
	"--on-error", "zeros", "--probe-cache", "", "--hwaccel", "none", "--allow-other"}

// Bounds on waits: each is far beyond what the step takes, and failing it says which step hung.
const (
	readyWait   = 2 * time.Minute // a mount to serve, from its container's start
	readerWait  = 5 * time.Minute // one container reading every sample
	commandWait = 5 * time.Minute // any other podman command (a build, a stop)
	changeWait  = time.Minute     // a looping reader to report a change of the mount
)

// repoRoot is the repository's root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// run runs a command with a bound on its time, and returns its stdout; it fails the test with
// the command's stderr when the command fails or does not end in time.
func run(t *testing.T, wait time.Duration, name string, args ...string) string {
	t.Helper()
	out, err := try(wait, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// try runs a command as run does, and returns its error instead of failing.
func try(wait time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return stdout.String(), fmt.Errorf("%s %s: did not end within %v (stderr: %s)", name, strings.Join(args, " "), wait, stderr.String())
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\nstderr: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// containerLogs is what a container wrote to its stdout and stderr (vidfs logs to stderr), or
// why it cannot be had.
func containerLogs(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), commandWait)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", "logs", name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s(podman logs: %v)", out, err)
	}
	return string(out)
}

// image is the image built for the test, and what it was built from.
type image struct {
	tag    string
	binary string // this machine's vidfs, the reference mounts' (and in the image unless a release is)
	videos string // testdata/videos
}

// buildImage builds the image for the test (removed at its end), or skips it without podman.
func buildImage(t *testing.T) *image {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed, so the container image is not tested (scripts/setup.sh test installs podman and runc)")
	}
	if os.Geteuid() != 0 {
		t.Skip("the container image's tests run podman as root (mounts, /dev/fuse, shared propagation)")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	img := &image{binary: filepath.Join(dir, "vidfs"), videos: filepath.Join(root, "testdata", "videos")}
	if built := os.Getenv("VIDFS_IMAGE_BINARY"); built != "" {
		run(t, commandWait, "cp", built, img.binary)
	} else {
		run(t, commandWait, "go", "build", "-o", img.binary, filepath.Join(root, "cmd", "vidfs"))
	}

	ctxDir := filepath.Join(dir, "context")
	if err := os.Mkdir(ctxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	suite := "bookworm"
	if release := os.Getenv("VIDFS_IMAGE_RELEASE"); release != "" {
		suite = "noble"
		b, err := os.ReadFile(release)
		if err != nil {
			t.Fatalf("VIDFS_IMAGE_RELEASE: %v", err)
		}
		if err := os.WriteFile(filepath.Join(ctxDir, filepath.Base(release)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		// The release's shape: vidfs-VERSION-linux-x86_64/{vidfs,LICENSE}.
		stage := filepath.Join(dir, "stage", "vidfs-host-linux-x86_64")
		if err := os.MkdirAll(stage, 0o755); err != nil {
			t.Fatal(err)
		}
		run(t, commandWait, "cp", img.binary, filepath.Join(root, "LICENSE"), stage)
		run(t, commandWait, "tar", "-C", filepath.Dir(stage), "-czf", filepath.Join(ctxDir, "vidfs-host-linux-x86_64.tar.gz"), filepath.Base(stage))
	}
	// The base: minutes the first time (debootstrap), then kept as a local image.
	base := strings.TrimSpace(run(t, 10*time.Minute, filepath.Join(root, "scripts", "image.sh"), "base", suite))
	img.tag = fmt.Sprintf("localhost/vidfs-test:%d", os.Getpid())
	run(t, commandWait, filepath.Join(root, "scripts", "image.sh"), "build", img.tag, ctxDir, base)
	t.Cleanup(func() { try(commandWait, "podman", "rmi", "-f", img.tag) })
	t.Logf("built %s on %s", img.tag, base)
	return img
}

// sharedDir makes a directory that is a shared mount point, as a node's hostPath is under
// Kubernetes: what a container mounts in it, bound in with rshared, appears here and in every
// container that binds it with rslave. The mount is made on its subdirectory mnt, never on the
// directory itself: a container started after the mount would bind the FUSE mount itself, which
// no unmount reaches, so its connection would outlive every unmount (vidfs then waits for it on
// SIGTERM until it is killed, and a restarted mount is never seen there). It is unmounted at
// the end of the test, with whatever is mounted in it.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "node")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting %s on itself: %v", dir, err)
	}
	t.Cleanup(func() {
		for range 10 {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				break
			}
		}
	})
	if err := syscall.Mount("", dir, "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
		t.Fatalf("making %s a shared mount: %v", dir, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "mnt"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fuseMounted tells whether a FUSE filesystem is mounted on dir, in this mount namespace.
func fuseMounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		i := slices.Index(f, "-")
		if len(f) > 4 && i > 0 && i+1 < len(f) && f[4] == dir && strings.HasPrefix(f[i+1], "fuse") {
			return true
		}
	}
	return false
}

// nodeMount is the mount's container, as the DaemonSet runs it.
type nodeMount struct {
	t    *testing.T
	name string
	dir  string // the host's directory it mounts in, on dir/mnt
}

// startNodeMount runs the image as the DaemonSet does: /dev/fuse and CAP_SYS_ADMIN, nothing
// more, and the host directory dir bound in at /node with shared propagation, mounting on
// /node/mnt; extra are podman run's
// further options (volumes, environment), args the mount's source and flags.
// name tells the container from others of the test.
func startNodeMount(t *testing.T, img *image, dir, name string, extra []string, src string, flags ...string) *nodeMount {
	t.Helper()
	m := &nodeMount{t: t, name: fmt.Sprintf("vidfs-test-%s-%d-%s", name, os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")), dir: dir}
	try(commandWait, "podman", "rm", "-f", m.name) // one left by a run that was killed
	args := slices.Concat([]string{"run", "-d", "--name", m.name,
		"--device", "/dev/fuse", "--cap-add", "SYS_ADMIN", "-v", dir + ":/node:rshared"},
		extra, []string{img.tag, src, "/node/mnt"}, mountFlags, flags)
	run(t, commandWait, "podman", args...)
	t.Cleanup(func() {
		if t.Failed() {
			logs := containerLogs(m.name)
			t.Logf("the mount's container logged:\n%s", logs)
		}
		try(commandWait, "podman", "rm", "-f", "-t", "10", m.name)
	})
	m.waitReady()
	return m
}

// waitReady waits until the host sees the container's mount serve (its stats file), as the
// DaemonSet's readiness probe does, and fails if the container ends first.
func (m *nodeMount) waitReady() {
	m.t.Helper()
	deadline := time.Now().Add(readyWait)
	for {
		if _, err := os.Stat(filepath.Join(m.dir, "mnt", ".vidfs", "stats")); err == nil && fuseMounted(m.t, filepath.Join(m.dir, "mnt")) {
			return
		}
		state, _ := try(commandWait, "podman", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", m.name)
		if s := strings.Fields(state); len(s) == 2 && s[0] != "running" && s[0] != "created" {
			logs := containerLogs(m.name)
			m.t.Fatalf("the mount's container ended (%s) before its mount served; it logged:\n%s", state, logs)
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the host did not see the container's mount serve on %s within %v", m.dir, readyWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop stops the container with SIGTERM, as Kubernetes and podman stop do, and checks that
// vidfs unmounted cleanly: exit status 0 and no mount left on the host's directory.
func (m *nodeMount) stop() {
	m.t.Helper()
	run(m.t, commandWait, "podman", "stop", "-t", "60", m.name)
	code := strings.TrimSpace(run(m.t, commandWait, "podman", "inspect", "-f", "{{.State.ExitCode}}", m.name))
	if code != "0" {
		logs := containerLogs(m.name)
		m.t.Fatalf("vidfs mount exited %s on SIGTERM, not 0 (a clean unmount); it logged:\n%s", code, logs)
	}
	if mnt := filepath.Join(m.dir, "mnt"); fuseMounted(m.t, mnt) {
		m.t.Fatalf("after SIGTERM, a FUSE mount is still on %s", mnt)
	}
}

// reader runs a shell script in a container of the image that binds the node's directory at
// /data with HostToContainer propagation (rslave), as a training pod does (the mount is then
// /data/mnt), and returns its stdout.
func reader(t *testing.T, img *image, dir, script string) string {
	t.Helper()
	return run(t, readerWait, "podman", "run", "--rm", "-v", dir+":/data:rslave", "--entrypoint", "/bin/sh", img.tag, "-c", script)
}

// hashScript prints "SHA256  ./VIDEO/K.raw" for every file under samples/, and then the
// mount's stats.
const hashScript = `set -e; cd /data/mnt/samples; find . -type f | sort | xargs sha256sum; echo STATS; cat /data/mnt/.vidfs/stats`

// hashes parses hashScript's output: file -> sha256, and the stats.
func hashes(t *testing.T, out string) (map[string]string, stats) {
	t.Helper()
	sums, st, ok := strings.Cut(out, "STATS\n")
	if !ok {
		t.Fatalf("the reader printed no stats:\n%s", out)
	}
	m := map[string]string{}
	for line := range strings.Lines(sums) {
		sum, name, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if !ok {
			t.Fatalf("the reader printed %q", line)
		}
		m[name] = sum
	}
	var s stats
	if err := json.Unmarshal([]byte(st), &s); err != nil {
		t.Fatalf("the mount's .vidfs/stats: %v\n%s", err, st)
	}
	return m, s
}

// stats is what these tests read of .vidfs/stats.
type stats struct {
	Samples int `json:"samples"`
	Cache   struct {
		Hits    int64   `json:"hits"`
		HitRate float64 `json:"hit_rate"`
	} `json:"cache"`
	Plans []struct {
		Name string `json:"name"`
	} `json:"plans"`
}

// reference mounts the videos on the host with this machine's vidfs, and returns every sample
// file's SHA-256 as hashScript names them.
func reference(t *testing.T, img *image) map[string]string {
	t.Helper()
	mnt := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, img.binary, slices.Concat([]string{"mount", img.videos, mnt}, mountFlags)...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := cmd.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the host's mount: %v\n%s", err, logs.String())
		}
	}()
	deadline := time.Now().Add(readyWait)
	for !fuseMounted(t, mnt) {
		if time.Now().After(deadline) {
			t.Fatalf("the host's mount did not serve within %v:\n%s", readyWait, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ref := map[string]string{}
	samples := filepath.Join(mnt, "samples")
	err := filepath.WalkDir(samples, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(samples, p)
		ref["./"+rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatalf("reading the host's mount: %v", err)
	}
	return ref
}

// sameSamples fails unless got holds every file of want with the same hash.
func sameSamples(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("the host's mount has no samples")
	}
	var diff []string
	for name, sum := range want {
		if got[name] != sum {
			diff = append(diff, fmt.Sprintf("%s: host %s, %s %q", name, sum, what, got[name]))
		}
	}
	if len(got) != len(want) {
		diff = append(diff, fmt.Sprintf("the host's mount has %d sample files, %s %d", len(want), what, len(got)))
	}
	if len(diff) > 0 {
		slices.Sort(diff)
		t.Fatalf("%d differences between the host's mount and %s:\n%s", len(diff), what, strings.Join(diff[:min(len(diff), 20)], "\n"))
	}
}

// loopScript reads one sample file again and again (opening it each time, as a DataLoader
// does), printing "N ok" or "N error: WHY" per read.
const loopScript = `f=/data/mnt/samples/cfr30.mp4/0.raw; i=0
while :; do i=$((i+1))
  if cat "$f" >/dev/null 2>/tmp/err; then echo "$i ok"; else echo "$i error: $(cat /tmp/err)"; fi
  sleep 0.05
done`

// loopReader is a container running loopScript.
type loopReader struct {
	t    *testing.T
	name string
}

func startLoopReader(t *testing.T, img *image, dir string) *loopReader {
	t.Helper()
	r := &loopReader{t: t, name: fmt.Sprintf("vidfs-test-reader-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))}
	try(commandWait, "podman", "rm", "-f", r.name)
	run(t, commandWait, "podman", "run", "-d", "--name", r.name, "-v", dir+":/data:rslave", "--entrypoint", "/bin/sh", img.tag, "-c", loopScript)
	t.Cleanup(func() { try(commandWait, "podman", "rm", "-f", "-t", "0", r.name) })
	return r
}

// lines is what the reader printed so far, one read a line.
func (r *loopReader) lines() []string {
	r.t.Helper()
	out := run(r.t, commandWait, "podman", "logs", r.name)
	var l []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l = append(l, sc.Text())
	}
	return l
}

// await waits until a read after the first `after` lines matches want ("ok" or "error"), and
// returns how many lines there are then and the line. Its reads must go on meanwhile: a reader
// that prints nothing new for changeWait is hung, and fails the test.
func (r *loopReader) await(after int, want string) (int, string) {
	r.t.Helper()
	seen, progress := after, time.Now()
	for {
		l := r.lines()
		for _, line := range l[min(after, len(l)):] {
			_, rest, _ := strings.Cut(line, " ")
			if strings.HasPrefix(rest, want) {
				return len(l), line
			}
		}
		if len(l) > seen {
			seen, progress = len(l), time.Now()
		}
		if time.Since(progress) > changeWait {
			last := ""
			if len(l) > 0 {
				last = l[len(l)-1]
			}
			r.t.Fatalf("the reader's reads hung: no read ended for %v, waiting for %q (last: %q)", changeWait, want, last)
		}
		if len(l)-after > 2000 {
			r.t.Fatalf("2000 reads and none %q; the last: %q", want, l[len(l)-1])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkNode is the whole check of one source: readers in other containers see every sample
// byte-identical to the host's mount, write a plan, see the hit rate rise; a SIGTERM unmounts
// cleanly and a looping reader gets errors, not a hang; a restart serves it again.
func checkNode(t *testing.T, img *image, ref map[string]string, extra []string, src string, flags ...string) {
	dir := sharedDir(t)
	m := startNodeMount(t, img, dir, "mount", extra, src, flags...)

	first, st1 := hashes(t, reader(t, img, dir, hashScript))
	sameSamples(t, "a reader container, first pass", ref, first)

	plan := make([]string, st1.Samples)
	for i := range plan {
		plan[i] = strconv.Itoa(st1.Samples - 1 - i)
	}
	reader(t, img, dir, fmt.Sprintf("printf '%%s\\n' '%s' > /data/mnt/.vidfs/plans/reader", strings.Join(plan, " ")))

	second, st2 := hashes(t, reader(t, img, dir, hashScript))
	sameSamples(t, "a reader container, second pass", ref, second)
	if !slices.ContainsFunc(st2.Plans, func(p struct {
		Name string `json:"name"`
	}) bool {
		return p.Name == "reader"
	}) {
		t.Errorf("the plan the reader wrote is not in .vidfs/stats' plans: %+v", st2.Plans)
	}
	t.Logf("hit rate %.3f after the first pass (%d hits), %.3f after the second (%d hits)",
		st1.Cache.HitRate, st1.Cache.Hits, st2.Cache.HitRate, st2.Cache.Hits)
	// Every sample is in the cache after the first pass: the second's reads of each are hits.
	if !(st2.Cache.HitRate > st1.Cache.HitRate) || st2.Cache.Hits-st1.Cache.Hits < int64(st1.Samples) {
		t.Errorf("the hit rate did not rise on the second pass: %.3f then %.3f (hits %d then %d, %d samples)",
			st1.Cache.HitRate, st2.Cache.HitRate, st1.Cache.Hits, st2.Cache.Hits, st1.Samples)
	}

	r := startLoopReader(t, img, dir)
	n, _ := r.await(0, "ok")
	// A file held open through the stop, as a DataLoader worker may: the unmount finds the mount
	// busy, detaches it and aborts its connection (fusectl, CAP_SYS_ADMIN), and its reads fail.
	held, err := os.Open(filepath.Join(dir, "mnt", "samples", "cfr30.mp4", "1.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	buf := make([]byte, 4096)
	if _, err := held.ReadAt(buf, 0); err != nil {
		t.Fatalf("reading a sample through the host's view of the mount: %v", err)
	}
	m.stop()
	n, line := r.await(n, "error")
	t.Logf("after SIGTERM, the reader's read failed: %s", line)
	readErr := make(chan error, 1)
	go func() { _, err := held.ReadAt(buf, 0); readErr <- err }()
	select {
	case err := <-readErr:
		if err == nil {
			t.Error("after SIGTERM, a read of a file held open through the stop succeeded")
		} else {
			t.Logf("after SIGTERM, a read of a file held open failed: %v", err)
		}
	case <-time.After(changeWait):
		t.Fatalf("after SIGTERM, a read of a file held open through the stop hung for %v", changeWait)
	}
	held.Close()

	run(t, commandWait, "podman", "start", m.name)
	m.waitReady()
	n, _ = r.await(n, "ok")
	after, _ := hashes(t, reader(t, img, dir, hashScript))
	sameSamples(t, "a reader container after the restart", ref, after)

	// Killed (OOM, SIGKILL): the dead mount stays on the node, and reads through it fail with
	// ENOTCONN. The DaemonSet's command detaches it and mounts again; the reader sees the new one.
	run(t, commandWait, "podman", "kill", "-s", "KILL", m.name)
	run(t, commandWait, "podman", "wait", m.name)
	// A read in flight as the process dies gets ECONNABORTED; later ones ENOTCONN.
	n, line = r.await(n, "error")
	if !strings.Contains(line, "not connected") && !strings.Contains(line, "connection abort") {
		t.Errorf("after SIGKILL, the reader's read failed with %q, want ENOTCONN or ECONNABORTED", line)
	}
	entry, err := json.Marshal(daemonSetCommand(t))
	if err != nil {
		t.Fatal(err)
	}
	m2 := startNodeMount(t, img, dir, "again", slices.Concat(extra, []string{"--entrypoint", string(entry), "-e", "MNT=/node/mnt"}), src, flags...)
	r.await(n, "ok")
	m2.stop()
}

// daemonSetCommand is the command of the DaemonSet's container in
// deploy/kubernetes/vidfs-node.yaml: it detaches a dead mount, then runs vidfs mount "$@".
func daemonSetCommand(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "kubernetes", "vidfs-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for doc := range strings.SplitSeq(string(b), "\n---\n") {
		var ds appsv1.DaemonSet
		if err := yaml.Unmarshal([]byte(doc), &ds); err != nil {
			t.Fatal(err)
		}
		if ds.Kind == "DaemonSet" && len(ds.Spec.Template.Spec.Containers) > 0 {
			return ds.Spec.Template.Spec.Containers[0].Command
		}
	}
	t.Fatal("no DaemonSet in vidfs-node.yaml")
	return nil
}

// TestImage builds the image and runs it as a node's mount, of a local directory and of a
// bucket on a real S3 server (versitygw, reached through the host's network).
func TestImage(t *testing.T) {
	img := buildImage(t)
	ref := reference(t, img)

	t.Run("local", func(t *testing.T) {
		checkNode(t, img, ref, []string{"-v", img.videos + ":/videos:ro"}, "/videos")
	})
	t.Run("s3", func(t *testing.T) {
		s := s3test.Start(t)
		s.PutDir("train", "videos/", img.videos)
		checkNode(t, img, ref, []string{"--network", "host",
			"-e", "AWS_ACCESS_KEY_ID=" + s3test.AccessKey, "-e", "AWS_SECRET_ACCESS_KEY=" + s3test.SecretKey,
			"-e", "AWS_REGION=us-east-1"},
			"s3://train/videos", "--s3-endpoint", s.Endpoint(), "--s3-path-style")
	})
}
