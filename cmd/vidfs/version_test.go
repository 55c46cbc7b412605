package main

import (
	"strings"
	"testing"

	project "github.com/vidfs/vidfs"
)

// TestVersionCommand: --version is the first line of `vidfs version`, which names FFmpeg's
// version, licence and configure line, Go, and the decoders vidfs needs.
func TestVersionCommand(t *testing.T) {
	code, short, _ := vidfs(t, "--version")
	if code != 0 || short != "vidfs "+project.Version()+"\n" {
		t.Fatalf("vidfs --version: exit %d, %q", code, short)
	}
	code, out, errs := vidfs(t, "version")
	if code != 0 || !strings.HasPrefix(out, short) {
		t.Fatalf("vidfs version: exit %d, %q, %q", code, out, errs)
	}
	for _, want := range []string{"\nGo:         go1.", "\nFFmpeg:     7.1", "LGPL version 2.1 or later", "\nconfigure:  ", "--enable-libdav1d", "\nglibc:      2.", "\nhwaccels:   cuda: ", "\ndecoders:   "} {
		if !strings.Contains(out, want) {
			t.Errorf("vidfs version lacks %q:\n%s", want, out)
		}
	}
	for _, dec := range []string{"h264", "hevc", "vp9", "libdav1d", "mpeg4"} {
		if !strings.Contains(out, " "+dec+" ") {
			t.Errorf("vidfs version does not list the %s decoder:\n%s", dec, out)
		}
	}
	if strings.Contains(out, "--enable-gpl") || strings.Contains(out, "--enable-nonfree") {
		t.Errorf("FFmpeg was configured with --enable-gpl or --enable-nonfree:\n%s", out)
	}
}
