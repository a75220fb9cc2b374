package redis

import (
	"log/slog"

	"github.com/kvgen/kvgen/registry"
)

// SetLogger makes c, returned by New, log to l instead of slog.Default(),
// so tests can see its warnings without touching the process's logger.
func SetLogger(c registry.Connector, l *slog.Logger) { c.(*connector).logger = l }
