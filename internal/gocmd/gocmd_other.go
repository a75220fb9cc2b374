//go:build !unix

package gocmd

import (
	"os"
	"os/exec"
)

var (
	interrupt os.Signal = os.Kill // no process groups and no interrupt to send: kill
	kill      os.Signal = os.Kill
)

func ownGroup(cmd *exec.Cmd) {}

// signalGroup signals the go command alone: without process groups its
// tools are left to finish.
func signalGroup(cmd *exec.Cmd, sig os.Signal) error {
	return cmd.Process.Signal(sig)
}
