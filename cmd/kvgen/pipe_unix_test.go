//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// kvgen list -json | head -c 10: kvgen, which handles SIGPIPE to stop
// cleanly, says nothing of the closed pipe and ends as SIGPIPE ends other
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
