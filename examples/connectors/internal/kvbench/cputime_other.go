//go:build !unix

package kvbench

import "time"

// cpuTime is not measured here: Pair reports no processor-time ratios.
func cpuTime() time.Duration { return 0 }
