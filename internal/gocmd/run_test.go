package gocmd

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A failed run is the go command's own words on one line, named by its
// subcommand; a stopped run says why it stopped.
func TestRunReportsTheGoCommandsWords(t *testing.T) {
	dir := t.TempDir()
	env := append(os.Environ(), "GOFLAGS=", "GO111MODULE=on", "GOWORK=off")
	stdout, _, err := Run(t.Context(), dir, env, "env", "GOOS")
	require.NoError(t, err)
	assert.NotEmpty(t, strings.TrimSpace(string(stdout)))

	_, stderr, err := Run(t.Context(), dir, env, "list", "./nosuchpackage")
	var ge *Error
	require.ErrorAs(t, err, &ge)
	assert.NotEmpty(t, stderr)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "go list: "), msg)
	assert.NotContains(t, msg, "\n")
	assert.NotContains(t, msg, "go: ", "the go command's prefixes are dropped")

	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("stopped")
	cancel(stop)
	_, _, err = Run(ctx, dir, env, "env", "GOOS")
	assert.ErrorIs(t, err, stop)
}
