package fs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountFake mounts f on a fresh directory for the test.
func mountFake(t *testing.T, f *FS) string {
	t.Helper()
	dir := t.TempDir()
	m, err := f.Mount(dir, MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return dir
}

// listing is every entry under dir with its mode and size, one per line.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		size := st.Size()
		if rel == ".vidfs/stats" {
			size = 0 // a snapshot: its size is not known until read
		}
		lines = append(lines, fmt.Sprintf("%s %v %d", rel, st.Mode(), size))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestReadOnly: every entry of the tree but the plan files refuses every change with EROFS or
// EPERM (.vidfs/plans takes new plans, TestPlanFiles), the tree is the same afterwards, and
// entries show the time the mount started.
func TestReadOnly(t *testing.T) {
	f, _ := fakeFS(t, 40, 1, nil)
	mnt := mountFake(t, f)
	files := []string{"clips.npy", "clips.raw", "index.csv", "classes.txt", ".vidfs/stats", ".vidfs/failed", ".vidfs/layout.json", ".vidfs/labels.npy", ".vidfs/videos.npy", ".vidfs/videos.txt",
		"samples/a/one.mp4/0.npy", "samples/b/three.mp4/2.raw"}
	dirs := []string{".", "samples", "samples/a", "samples/b/three.mp4", ".vidfs", ".vidfs/plans"}
	plans := []string{".vidfs/order", ".vidfs/order.npy"}
	before := listing(t, mnt)
	if !strings.Contains(before, "samples/b/three.mp4/2.raw -r--r--r-- 192") {
		t.Fatalf("unexpected tree:\n%s", before)
	}
	for d, want := range map[string]string{".": ".vidfs classes.txt clips.npy clips.raw index.csv samples",
		".vidfs": "epochs failed labels.npy layout.json order order.npy plans stats videos.npy videos.txt", "samples": "a b"} {
		entries, err := os.ReadDir(filepath.Join(mnt, d))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if got := strings.Join(names, " "); err != nil || got != want {
			t.Errorf("%s holds %q (%v), want %q", d, got, err, want)
		}
	}

	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.EPERM) {
			t.Errorf("%s: %v, want EROFS or EPERM", what, err)
		}
	}
	p := func(rel string) string { return filepath.Join(mnt, rel) }
	// (The kernel answers unlink of a directory, rmdir of a file and renames between the two
	// itself, with EISDIR or ENOTDIR, and a rename onto itself with success.)
	for _, e := range append(files, plans...) {
		refused("unlink "+e, syscall.Unlink(p(e)))
		refused("rename "+e, syscall.Rename(p(e), p(e)+".moved"))
		if e != "classes.txt" {
			refused("rename "+e+" over classes.txt", syscall.Rename(p(e), p("classes.txt")))
			refused("rename classes.txt over "+e, syscall.Rename(p("classes.txt"), p(e)))
		}
		refused("link "+e, syscall.Link(p(e), p("samples/linked")))
		refused("link "+e+" beside itself", syscall.Link(p(e), p(e)+".linked"))
	}
	for _, d := range dirs[1:] {
		refused("rmdir "+d, syscall.Rmdir(p(d)))
		refused("rename "+d, syscall.Rename(p(d), p(d)+".moved"))
		other := ".vidfs"
		if strings.HasPrefix(d, ".vidfs") {
			other = "samples/a"
		}
		refused("rename "+d+" over "+other, syscall.Rename(p(d), p(other)))
	}
	for _, e := range append(files, dirs...) {
		refused("chmod "+e, syscall.Chmod(p(e), 0o777))
		refused("chown "+e, syscall.Chown(p(e), 1, 1))
		refused("utimes "+e, syscall.UtimesNano(p(e), []syscall.Timespec{{Sec: 1}, {Sec: 1}}))
		refused("setxattr "+e, syscall.Setxattr(p(e), "user.vidfs", []byte("x"), 0))
		refused("removexattr "+e, syscall.Removexattr(p(e), "user.vidfs"))
	}
	for _, e := range files {
		refused("truncate "+e, syscall.Truncate(p(e), 0))
		refused("open for writing "+e, openErr(p(e), os.O_WRONLY))
	}
	for _, d := range dirs {
		n := p(filepath.Join(d, "new"))
		if d != ".vidfs/plans" { // where creating a file makes a plan
			refused("create in "+d, openErr(n, os.O_CREATE|os.O_WRONLY))
		}
		refused("mkdir in "+d, syscall.Mkdir(n, 0o755))
		refused("mknod in "+d, syscall.Mknod(n, syscall.S_IFREG|0o644, 0))
		refused("mkfifo in "+d, syscall.Mkfifo(n, 0o644))
		refused("symlink in "+d, syscall.Symlink("clips.npy", n))
	}
	if after := listing(t, mnt); after != before {
		t.Errorf("the tree changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The plan files take plans.
	if err := os.WriteFile(p(".vidfs/order"), []byte("3 2 1\n"), 0); err != nil {
		t.Errorf("writing the plan: %v", err)
	}
	if plan, _ := os.ReadFile(p(".vidfs/order")); string(plan) != "3 2 1\n" {
		t.Errorf("plan reads back as %q", plan)
	}

	// Times: the mount's start, not 1970.
	for _, e := range append(append(files, dirs...), plans...) {
		st, err := os.Stat(p(e))
		if err != nil {
			t.Fatal(err)
		}
		if d := st.ModTime().Sub(f.start); d < -time.Second || d > time.Second {
			t.Errorf("%s: modified %v, want the mount's start %v", e, st.ModTime(), f.start)
		}
	}
}

func openErr(path string, flag int) error {
	f, err := os.OpenFile(path, flag, 0o644)
	if err == nil {
		f.Close()
	}
	return err
}
