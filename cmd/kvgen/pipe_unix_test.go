//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// kvgen list -json | head -c 10: kvgen, which stops cleanly on the write
// that finds the pipe closed, says nothing of the closed pipe and ends as SIGPIPE ends other
// tools, whatever it was writing.
func TestClosedStdoutEndsAsSIGPIPE(t *testing.T) {
	kvgen, err := exec.LookPath("kvgen") // this test binary, as the scripts run it
	require.NoError(t, err)
	dir := kvgentest.Module(t, "example.com/pipe", map[string]string{
		"connectors.yaml": "version: 1\noutput: host/connectors_gen.go\nconnectors: []\n",
		"host/main.go":    "package main\n\nfunc main() {}\n",
	})
	for _, args := range [][]string{{"list", "-json"}, {"schema"}, {"inspect", "-json", kvgen}} {
		cmd := exec.Command(kvgen, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KVGENCACHE=off")
		cmd.Stdout = closedPipe(t)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%q: %v", args, err)
		status := ee.Sys().(syscall.WaitStatus)
		assert.True(t, status.Signaled() && status.Signal() == syscall.SIGPIPE, "%q: %v", args, err)
		assert.Empty(t, stderr.String(), "%q", args)
	}
}

// A connection its peer reset (a registry's, in a push) raises SIGPIPE on
// the write that finds it: that is an error of the write, not a stop of
// the run, which once ended a push as "stopped by broken pipe".
func TestBrokenConnectionIsNoStop(t *testing.T) {
	ctx := stopOnSignal(t.Context())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Read(make([]byte, 1))       // once the client is connected
			c.(*net.TCPConn).SetLinger(0) // a reset, not a close
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte{0})
	require.NoError(t, err)
	var werr error
	for range 50 {
		if _, werr = c.Write(make([]byte, 64<<10)); errors.Is(werr, syscall.EPIPE) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.ErrorIs(t, werr, syscall.EPIPE)
	time.Sleep(100 * time.Millisecond) // for a signal to arrive, were it handled
	assert.NoError(t, ctx.Err(), "the run stopped: %v", context.Cause(ctx))
}
