package labels

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// write writes a labels file named name in a temporary directory and returns its path.
func write(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRead: every form a file may take gives the same labels: CSV with and without a header (path,label or other names)
// (quoted fields, spaces, CRLF, a byte order mark, blank lines, a path named twice alike), and
// JSON as an object or a list, whatever the extension says.
func TestRead(t *testing.T) {
	want := map[string]string{"walk/a.mp4": "walking", "b.mp4": "running, fast", "c d/e.webm": "walking"}
	for _, tc := range []struct{ name, text string }{
		{"l.csv", "path,label\nwalk/a.mp4,walking\nb.mp4,\"running, fast\"\n\"c d/e.webm\",walking\n"},
		{"other-header.csv", "Video,Class\nwalk/a.mp4,walking\nb.mp4,\"running, fast\"\n\"c d/e.webm\",walking\n"},
		{"l.txt", "\ufeffwalk/a.mp4, walking\r\n\r\n./b.mp4,\"running, fast\"\r\nc d/e.webm,walking\r\nwalk/a.mp4,walking\r\n"},
		{"l.json", `{"walk/a.mp4": "walking", "b.mp4": "running, fast", "c d/e.webm": " walking"}`},
		{"labels", "  \n[{\"path\": \"walk/a.mp4\", \"label\": \"walking\", \"id\": 7},\n {\"path\": \"b.mp4\", \"label\": \"running, fast\"},\n {\"label\": \"walking\", \"path\": \"c d/e.webm\"}]\n"},
	} {
		f, err := Read(write(t, tc.name, tc.text))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := map[string]string{}
		for p := range f.Paths() {
			got[p], _ = f.Label(p)
		}
		if !maps.Equal(got, want) || f.Len() != 3 {
			t.Errorf("%s: %v, want %v", tc.name, got, want)
		}
		if c := strings.Join(f.Classes, "|"); c != "running, fast|walking" {
			t.Errorf("%s: classes %s", tc.name, c)
		}
		if _, ok := f.Label("nope.mp4"); ok {
			t.Errorf("%s: a path it does not name has a label", tc.name)
		}
	}
}

// TestReadRefuses: a file that cannot be meant is refused with its name, the line and the reason.
func TestReadRefuses(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"l.csv", "a.mp4,x\nb.mp4,y,z\n", "line 2: 3 fields, want 2 (path,label)"},
		{"l.csv", "a.mp4,x\nb.mp4\n", "line 2: 1 fields, want 2"},
		{"l.csv", "a.mp4,x\n\"b.mp4,y\n", "line 2"},
		{"l.csv", "a.mp4,x\nb.mp4,y\na.mp4,z\n", `line 3: a.mp4 labelled "z", but "x" on line 1`},
		{"l.csv", "path,label\na.mp4,\n", "line 2: a.mp4 has an empty label"},
		{"l.csv", "a.mp4,x\n,y\n", "line 2: an empty path"},
		{"l.csv", "a.mp4,x\n../b.mp4,y\n", "line 2: path ../b.mp4: want a path relative to the source"},
		{"l.csv", "/data/a.mp4,x\n", "line 1: path /data/a.mp4"},
		{"l.csv", "a.mp4,\"x\ny\"\n", "line 1: a.mp4 has a label with a line break"},
		{"l.csv", "path,label\n", "no labels in it"},
		{"l.json", "{\"a.mp4\": \"x\",\n \"b.mp4\": 3}", "line 2: b.mp4 has a label of a number, want a string"},
		{"l.json", "{\"a.mp4\": \"x\",\n\n \"a.mp4\": \"y\"}", `line 3: a.mp4 labelled "y", but "x" on line 1`},
		{"l.json", "[{\"path\": \"a.mp4\", \"label\": \"x\"},\n {\"path\": \"b.mp4\"}]", "line 2: b.mp4 has no \"label\""},
		{"l.json", "[{\"path\": \"a.mp4\", \"label\": \"x\"},\n {\"label\": \"y\"}]", "line 2: item 1 has no \"path\" string"},
		{"l.json", "[{\"path\": \"a.mp4\", \"label\": \"x\"},\n \"b.mp4\"]", "line 2: item 1 is not an object"},
		{"l.json", "{\"a.mp4\": \"x\",\n \"b.mp4\" \"y\"}", "line 2"},
		{"l.json", "{\"a.mp4\": \"x\",\n", "line 2: the JSON ends early"},
		{"l.json", "{\"a.mp4\": \"x\"}\n{}", "line 2: more after the JSON's end"},
		{"l.json", "\"a.mp4\"", "line 1: want an object"},
	} {
		file := write(t, tc.name, tc.text)
		_, err := Read(file)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%q: %v, want an error naming %s and saying %q", tc.text, err, file, tc.want)
		}
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none.csv")); err == nil || !strings.Contains(err.Error(), "none.csv") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestClassesShared: a label many videos have is one string, and Classes lists each once.
func TestClassesShared(t *testing.T) {
	var b strings.Builder
	b.WriteString("path,label\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "v%d.mp4,%s\n", i, []string{"one", "two", "three"}[i%3])
	}
	f, err := Read(write(t, "l.csv", b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Classes, []string{"one", "three", "two"}) {
		t.Fatalf("classes %v", f.Classes)
	}
	seen := map[string]*byte{}
	for p := range f.Paths() {
		l, _ := f.Label(p)
		ptr := unsafe.StringData(l)
		if prev, ok := seen[l]; ok && prev != ptr {
			t.Fatalf("label %q is held twice", l)
		}
		seen[l] = ptr
	}
}
