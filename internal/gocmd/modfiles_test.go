//go:build unix

package gocmd

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The files the go command reads first are checked before it runs: a FIFO
// go.mod blocked kvgen check for good, and /dev/zero grew go list to 3 GB.
func TestCheckModuleFiles(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "pkg", "sub")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	gomod := filepath.Join(dir, "go.mod")
	require.NoError(t, syscall.Mkfifo(gomod, 0o644))
	err := CheckModuleFiles(sub, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the main module's go.mod: ")
	assert.Contains(t, err.Error(), "is not a regular file but a FIFO")
	_, _, err = Run(context.Background(), sub, os.Environ(), "env", "GOMOD")
	assert.ErrorContains(t, err, "is not a regular file but a FIFO", "Run checks first")

	require.NoError(t, os.Remove(gomod))
	require.NoError(t, os.Symlink("/dev/zero", gomod))
	assert.ErrorContains(t, CheckModuleFiles(sub, nil), "a character device")

	require.NoError(t, os.Remove(gomod))
	require.NoError(t, os.WriteFile(gomod, []byte("module m\n"), 0o644))
	require.NoError(t, CheckModuleFiles(sub, nil))
	require.NoError(t, os.Truncate(gomod, 1<<30)) // sparse
	assert.ErrorContains(t, CheckModuleFiles(sub, nil), "is larger than")
	require.NoError(t, os.Truncate(gomod, 9))

	gowork := filepath.Join(dir, "pkg", "go.work")
	require.NoError(t, syscall.Mkfifo(gowork, 0o644))
	assert.ErrorContains(t, CheckModuleFiles(sub, nil), "the workspace's go.work: ")
	require.NoError(t, CheckModuleFiles(sub, []string{"GOWORK=off"}))
	assert.ErrorContains(t, CheckModuleFiles(sub, []string{"GOWORK=" + gowork}), "is not a regular file but a FIFO")
}
