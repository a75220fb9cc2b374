package redis_test

import (
	"testing"

	"github.com/kvgen/kvgen/examples/external/redis"
	"github.com/kvgen/kvgen/registry/conformance"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	conformance.Run(t, redis.New, conformance.Options{
		// One server for the whole suite; a key prefix per subtest keeps
		// its stores apart.
		Extra: func(t testing.TB) map[string]any {
			return map[string]any{
				"addrs":      []string{srv.Addr()},
				"key_prefix": "conformance:" + t.Name() + ":",
			}
		},
	})
}
