//go:build unix

package gocmd

import (
	"errors"
	"os/exec"
	"syscall"
)

const (
	interrupt = syscall.SIGINT
	kill      = syscall.SIGKILL
)

// ownGroup makes the go command the leader of a new process group, which
// the processes it starts join.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// signalGroup sends sig to the go command's process group. It is called
// only while the go command has not been waited for, so the group's id
// cannot have been reused; a group already gone is not an error.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	err := syscall.Kill(-cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
