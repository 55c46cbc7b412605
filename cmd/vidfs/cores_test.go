package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultsFromCores: a mount run on one core (taskset -c 0) decodes and probes with the
// defaults that core gives, and says so in its help and its stats.
func TestDefaultsFromCores(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	help := exec.Command("taskset", "-c", "0", os.Args[0], "mount", "--help")
	help.Env = append(os.Environ(), "VIDFS_TEST_MAIN=1")
	out, err := help.CombinedOutput()
	if err != nil {
		t.Fatalf("vidfs mount --help: %v\n%s", err, out)
	}
	text := strings.Join(strings.Fields(string(out)), " ") // the help is wrapped
	for _, want := range []string{
		"samples decoded at once ahead of the reader (default: 1, from the 1 core this process may use",
		"videos probed at once (default: 1, from the 1 core this process may use",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("vidfs mount --help on one core: no %q in\n%s", want, out)
		}
	}

	m := startMountIn(t, []string{"taskset", "-c", "0"}, makeSource(t), "--cache-mem", "16MiB", "--size", "32x32")
	b, err := os.ReadFile(filepath.Join(m.dir, ".vidfs/stats"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Decode struct {
			Workers int `json:"workers"`
		} `json:"decode"`
		Scan struct {
			Workers int `json:"workers"`
			Cores   int `json:"cores"`
		} `json:"scan"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Decode.Workers != 1 || st.Scan.Workers != 1 || st.Scan.Cores != 1 {
		t.Fatalf("on one core: decode.workers %d, scan.workers %d, scan.cores %d; want 1, 1, 1\n%s", st.Decode.Workers, st.Scan.Workers, st.Scan.Cores, b)
	}
}
