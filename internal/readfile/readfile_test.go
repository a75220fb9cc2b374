package readfile

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadsRegularFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "go.mod")
	require.NoError(t, os.WriteFile(path, []byte("module m\n"), 0o644))
	data, err := Read(path, Max)
	require.NoError(t, err)
	assert.Equal(t, "module m\n", string(data))

	data, err = ReadIfExists(filepath.Join(dir, "go.sum"), Max)
	require.NoError(t, err)
	assert.Nil(t, data)
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	data, err = ReadIfExists(empty, Max)
	require.NoError(t, err)
	assert.NotNil(t, data, "an empty file is not a missing one")

	link := filepath.Join(dir, "link.mod")
	if err := os.Symlink(path, link); err != nil && runtime.GOOS == "windows" {
		t.Skipf("symbolic links need a privilege on Windows: %v", err)
	}
	data, err = Read(link, Max)
	require.NoError(t, err, "a link to a regular file is read")
	assert.Equal(t, "module m\n", string(data))
}

func TestRefusesLargeFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "go.sum")
	require.NoError(t, os.WriteFile(path, make([]byte, 101), 0o644))
	_, err := Read(path, 100)
	var tl *TooLargeError
	require.ErrorAs(t, err, &tl)
	assert.Contains(t, err.Error(), "larger than 100 bytes")
	_, err = Read(path, 101)
	require.NoError(t, err)
}
