package main

import (
	"strings"
	"testing"
)

// TestVersionSaysNVDECIsNotSandboxed: `vidfs version` says plainly which decoders run in sandboxed
// helpers, and that NVDEC's do not.
func TestVersionSaysNVDECIsNotSandboxed(t *testing.T) {
	code, out, _ := vidfs(t, "version")
	if code != 0 || !strings.Contains(out, "\nsandbox:    CPU decoders and probes run in sandboxed helper processes") ||
		!strings.Contains(out, "NVDEC decoders do not") {
		t.Errorf("vidfs version does not say what is sandboxed:\n%s", out)
	}
}
