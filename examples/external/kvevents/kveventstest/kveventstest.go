// Package kveventstest helps tests read kvevents' batches as a router
// does, through libzmq: Python's pyzmq and msgpack.
package kveventstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Python returns a python3 with pyzmq and msgpack (the one on PATH, else
// Debian's /usr/bin/python3, where apt installs them), skipping the test
// without one; in CI (CI=true) their absence fails it instead.
func Python(t testing.TB) string {
	t.Helper()
	var tried []string
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		py, err := exec.LookPath(name)
		if err != nil {
			tried = append(tried, err.Error())
			continue
		}
		out, err := exec.Command(py, "-c", "import zmq, msgpack").CombinedOutput()
		if err == nil {
			return py
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		tried = append(tried, py+": "+lines[len(lines)-1])
	}
	msg := "reading KV events through libzmq needs python3 with pyzmq and msgpack (Debian: apt-get install python3-zmq python3-msgpack); " + strings.Join(tried, "; ")
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
