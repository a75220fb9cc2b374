package main

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closedPipe returns the write end of a pipe whose reader is gone, as
// stdout is once head has what it wants.
func closedPipe(t *testing.T) *os.File {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, r.Close())
	t.Cleanup(func() { w.Close() })
	return w
}

// A closed stdout ends the command quietly: no "broken pipe", and run
// says so, for main to end kvgen as a closed pipe ends other tools.
func TestClosedStdoutIsQuiet(t *testing.T) {
	t.Setenv("KVGENCACHE", "off")
	for _, args := range [][]string{{"version", "-json"}, {"schema"}} {
		var stderr bytes.Buffer
		code := run(context.Background(), args, closedPipe(t), &stderr)
		assert.Equal(t, exitClosedPipe, code, "%q", args)
		assert.Empty(t, stderr.String(), "%q", args)
	}
}
