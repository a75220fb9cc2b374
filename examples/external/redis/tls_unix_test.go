//go:build unix

package redis_test

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/external/redis"
	"github.com/kvgen/kvgen/registry/kv"
)

// Certificate files come from settings, which are not trusted: a device,
// a FIFO or a huge file is refused at once instead of read without end or
// waited on. FIFOs and /dev/zero are Unix's, and so is the test.
func TestTLSFilesAreBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	huge := filepath.Join(dir, "huge.pem")
	require.NoError(t, os.WriteFile(huge, make([]byte, 5<<20), 0o600))
	for _, tc := range []struct {
		name string
		tls  map[string]any
		want string
	}{
		{"endless CA file", map[string]any{"ca_file": "/dev/zero"}, `tls: ca_file: "/dev/zero": not a regular file`},
		{"FIFO as CA file", map[string]any{"ca_file": fifo}, "tls: ca_file: " + strconv.Quote(fifo) + ": not a regular file"},
		{"huge CA file", map[string]any{"ca_file": huge}, "tls: ca_file: " + strconv.Quote(huge) + ": more than 4194304 bytes"},
		{"endless key file", map[string]any{"cert_file": huge, "key_file": "/dev/zero"}, `tls: key_file: "/dev/zero": not a regular file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := redis.New(t.Context(), config("e", map[string]any{"tls": tc.tls}), kv.RoleWorker)
			assert.ErrorContains(t, err, tc.want)
			assert.Less(t, time.Since(start), 5*time.Second)
		})
	}
}
