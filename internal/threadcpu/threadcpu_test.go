package threadcpu

import (
	"runtime"
	"testing"
)

// TestNow: the thread's CPU time grows by what the thread spins, and not by what it sleeps.
func TestNow(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	began := Now()
	x := 0
	for i := range 50_000_000 {
		x += i ^ x
	}
	spun := Now() - began
	if spun <= 0 {
		t.Fatalf("spinning took %v of CPU (%d)", spun, x)
	}
}
