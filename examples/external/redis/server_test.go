package redis_test

import (
	"testing"

	"github.com/kvgen/kvgen/examples/external/redis/internal/redistest"
)

// startRedis starts a real redis-server for t; see redistest.Start.
func startRedis(t testing.TB) *redistest.Server { return redistest.Start(t) }
