package gofiles

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIn(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.go", "a.go", "a_test.go", "notes.txt", "go.mod", "x.go.orig"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "dir.go"), 0o755))
	src, tests, err := In(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.go", "b.go"}, src)
	assert.Equal(t, []string{"a_test.go"}, tests)

	_, _, err = In(filepath.Join(dir, "nowhere"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
