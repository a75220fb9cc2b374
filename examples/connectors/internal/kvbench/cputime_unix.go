//go:build unix

package kvbench

import (
	"syscall"
	"time"
)

// cpuTime returns the processor time the process has used, in user and
// kernel mode, on all its threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
