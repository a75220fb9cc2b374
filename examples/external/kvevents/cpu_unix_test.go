//go:build unix

package kvevents

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the processor time, user and system, the process has
// used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
