package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every atomic write removes what an earlier one of the same file, killed
// before its rename, left behind: go.mod's and go.sum's too.
func TestWriteRemovesItsStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	gomod := filepath.Join(dir, "go.mod")
	stale := filepath.Join(dir, ".go.mod.4242.tmp")
	other := filepath.Join(dir, ".go.sum.4242.tmp")
	notOurs := filepath.Join(dir, ".go.mod.x42.tmp")
	for _, f := range []string{stale, other, notOurs} {
		require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
	}
	require.NoError(t, Write(gomod, []byte("module example.com/m\n")))
	data, err := os.ReadFile(gomod)
	require.NoError(t, err)
	assert.Equal(t, "module example.com/m\n", string(data))
	assert.NoFileExists(t, stale)
	assert.FileExists(t, other, "another file's temporary is left for that file's next write")
	assert.FileExists(t, notOurs, "a name Write does not make is not Write's")
}

func TestWriteKeepsPermissionsAndLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.go")
	require.NoError(t, os.WriteFile(real, []byte("old"), 0o600))
	link := filepath.Join(dir, "link.go")
	require.NoError(t, os.Symlink("real.go", link))

	require.NoError(t, Write(link, []byte("new")))
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSymlink, "the link stays a link")
	data, err := os.ReadFile(real)
	require.NoError(t, err)
	assert.Equal(t, "new", string(data))
	fi, err = os.Stat(real)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// A link that leads nowhere is neither replaced by a file nor followed
// into a file made where it points.
func TestWriteRefusesADanglingLink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "go.sum")
	require.NoError(t, os.Symlink(filepath.Join(dir, "missing", "go.sum"), link))
	err := Write(link, []byte("data\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "symbolic link that cannot be followed")
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSymlink, "the link is still a link")
	_, err = os.Stat(filepath.Join(dir, "missing"))
	assert.True(t, os.IsNotExist(err))
}
