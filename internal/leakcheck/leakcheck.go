// Package leakcheck fails tests whose goroutines outlive them, with go.uber.org/goleak: a
// package's TestMain runs Main, and a test that must leave nothing behind calls None.
package leakcheck

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// settle is how long goroutines are given to end after the tests: the connections a test's
// servers and clients leave end as their peers see them closed, which takes a moment under the
// race detector on a loaded machine.
const settle = time.Minute

// Main runs m's tests, then checks that no goroutine started during them is still running,
// and returns the exit code for os.Exit.
func Main(m *testing.M) int {
	before := goleak.IgnoreCurrent()
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := find(before); err != nil {
		fmt.Fprintf(os.Stderr, "goroutines outlived the tests: %v\n", err)
		return 1
	}
	return 0
}

// None fails t if a goroutine that was not running when before was taken
// (goleak.IgnoreCurrent()) is still running once the goroutines have had time to settle.
func None(t testing.TB, before goleak.Option) {
	t.Helper()
	if err := find(before); err != nil {
		t.Fatalf("goroutines left behind: %v", err)
	}
}

// find looks for goroutines beyond those of before until there are none or settle has passed.
// Idle connections of http.DefaultTransport (a test's own clients and proxies) are closed on
// each try: they are the transport's, kept for reuse, not leaks.
func find(before goleak.Option) error {
	deadline := time.Now().Add(settle)
	for {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		err := goleak.Find(before)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
