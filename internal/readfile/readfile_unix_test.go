//go:build unix

// FIFOs and /dev/zero are Unix's: elsewhere the test has nothing to put
// where a file is expected.

package readfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusesWhatIsNotAFile puts a device, a FIFO and a directory where a
// file is expected: each is refused at once, and none is read.
func TestRefusesWhatIsNotAFile(t *testing.T) {
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
