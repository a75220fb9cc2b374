package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd when the test process dies, so a
// test binary killed by a timeout or for memory leaves no redis-server
// behind (t.Cleanup does not run then).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
