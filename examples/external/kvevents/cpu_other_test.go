//go:build !unix

package kvevents

import (
	"testing"
	"time"
)

// processCPU is 0 where getrusage is not: BenchmarkSaveWithEvents then
// reports no processor time.
func processCPU(*testing.B) time.Duration { return 0 }
