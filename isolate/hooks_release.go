//go:build !vidfstest

package isolate

// poison does nothing in a release build (hooks_test.go's twin crashes on marked videos).
func poison(string) {}

// probeSandbox tries nothing in a release build.
func probeSandbox() []probeResult { return nil }
