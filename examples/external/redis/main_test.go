package redis_test

import (
	"flag"
	"runtime"
	"strconv"
	"testing"
)

// TestMain lets more tests run side by side than there are cores, unless
// -test.parallel says how many: the tests here mostly wait for
// redis-server processes (a cluster to form, a replica to take over a
// killed master), not for the CPU.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(max(runtime.GOMAXPROCS(0), 4)))
	}
	m.Run()
}
