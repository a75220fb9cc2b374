package readfile

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

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

	link := filepath.Join(dir, "link.mod")
	require.NoError(t, os.Symlink(path, link))
	data, err = Read(link, Max)
	require.NoError(t, err, "a link to a regular file is read")
	assert.Equal(t, "module m\n", string(data))

	data, err = ReadIfExists(filepath.Join(dir, "go.sum"), Max)
	require.NoError(t, err)
	assert.Nil(t, data)
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	data, err = ReadIfExists(empty, Max)
	require.NoError(t, err)
	assert.NotNil(t, data, "an empty file is not a missing one")
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

// TestRefusesWhatIsNotAFile puts a device, a FIFO and a directory where a
// file is expected: each is refused at once, and none is read.
func TestRefusesWhatIsNotAFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs or /dev/zero")
	}
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	fifo := filepath.Join(dir, "fifo.go")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	for path, want := range map[string]string{zero: "a character device", fifo: "a FIFO", dir: "a directory"} {
		done := make(chan error, 1)
		go func() {
			_, err := Read(path, Max)
			done <- err
		}()
		select {
		case err := <-done:
			var nr *NotRegularError
			require.ErrorAs(t, err, &nr, path)
			assert.Contains(t, err.Error(), want)
		case <-time.After(10 * time.Second):
			t.Fatalf("reading %s blocks", path)
		}
	}
}
