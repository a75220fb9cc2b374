//go:build unix

package filesystem

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// A FIFO in place of a layer file is a miss at once, not a load that hangs.
func TestSpecialFileIsAMiss(t *testing.T) {
	ctx := t.Context()
	c, _, path := savedLayer(t)
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o600))

	done := make(chan error, 1)
	go func() {
		_, err := c.LoadLayer(ctx, req, layers[0], bs)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, kv.ErrMiss)
		assert.ErrorContains(t, err, "never followed")
	case <-time.After(10 * time.Second):
		// Unblock the load so the test can end.
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		t.Fatal("LoadLayer blocked on a FIFO")
	}
}
