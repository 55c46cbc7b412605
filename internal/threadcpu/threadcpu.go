// Package threadcpu reads the CPU time the calling thread has used, for work that is paid for in
// CPU (the training copy's budget): a goroutine that measures must be locked to its thread
// (runtime.LockOSThread) between two readings.
package threadcpu

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now is the CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID), 0 if the clock
// cannot be read.
func Now() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
