package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// goredisLogs hands go-redis's own log lines (a dial that failed, a hook's
// panic), which it writes straight to stderr by default, to slog: its
// logger is one for the whole process, so it is set once, by the first
// New, to one adapter that logs through slog.Default at the time of each
// line.
var goredisLogs sync.Once

func routeGoRedisLogs() {
	goredisLogs.Do(func() { goredis.SetLogger(slogLogger{}) })
}

// slogLogger is go-redis's Logging interface on slog.
type slogLogger struct{}

func (slogLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	slog.Default().Log(ctx, goredisLevel(msg), msg, slog.String("logger", "go-redis"))
}

// goredisLevel is the level a go-redis line means: its lines carry none.
// A recovered panic is an error; a failure go-redis retries or works
// around (a dial, a hook, a connection it drops) a warning, which the
// connector reports again, as an error, when the call it serves fails; the
// rest is information.
func goredisLevel(msg string) slog.Level {
	switch lower := strings.ToLower(msg); {
	case strings.Contains(lower, "panic"):
		return slog.LevelError
	case strings.Contains(lower, "fail"), strings.Contains(lower, "error"),
		strings.Contains(lower, "rejected"), strings.Contains(lower, "removing"):
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
