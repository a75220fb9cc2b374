package redis_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// go-redis's own lines, such as a pool's failed dial while the server is
// down, reach slog.Default as warnings naming go-redis, not stderr raw.
// Not parallel: it sets the process's default logger.
func TestGoRedisLogsGoToSlog(t *testing.T) {
	logs := new(bytes.Buffer)
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))

	srv := startRedis(t)
	w := openWorker(t, config("e", map[string]any{"addrs": []string{srv.Addr()}, "dial_timeout": "1s"}, "a"))
	srv.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := w.LoadLayer(ctx, request("down", 1, blockSize), "a", blockSize)
	require.Error(t, err)
	assert.Regexp(t, `level=WARN msg="redis: connection pool: failed to dial after \d+ attempts: .*" logger=go-redis`, logs.String())
}
