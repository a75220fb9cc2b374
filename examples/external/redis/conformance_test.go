package redis_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/external/redis"
	"github.com/kvgen/kvgen/registry/conformance"
	"github.com/kvgen/kvgen/registry/kv"
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
		// A byte appended to the layer's value, as a torn or foreign
		// write would leave it.
		Damage: func(t testing.TB, extra map[string]any, prefix kv.BlockHash, layer string) {
			key := extra["key_prefix"].(string) + "{" + prefix.String() + "}:" + url.PathEscape(layer)
			n, err := rawClient(t, srv.Addr()).Append(t.Context(), key, "x").Result()
			require.NoError(t, err)
			require.Greater(t, n, int64(1), "the layer was stored")
		},
		// Deleted as another client would, unseen by the connector but
		// for the server's keyspace notifications.
		Remove: func(t testing.TB, extra map[string]any, prefix kv.BlockHash, layer string) {
			key := extra["key_prefix"].(string) + "{" + prefix.String() + "}:" + url.PathEscape(layer)
			require.Equal(t, int64(1), rawClient(t, srv.Addr()).Del(t.Context(), key).Val(), "the layer was stored")
		},
	})
}
