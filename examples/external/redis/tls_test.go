package redis_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/external/redis"
	"github.com/kvgen/kvgen/examples/external/redis/internal/redistest"
	"github.com/kvgen/kvgen/registry/kv"
)

// TestTLS runs the connector against a redis-server that speaks only TLS
// and asks for a client certificate, with certificates made for the test.
func TestTLS(t *testing.T) {
	t.Parallel()
	certs := redistest.NewCerts(t)
	srv := redistest.StartTLS(t, certs)
	port := srv.Port()
	full := map[string]any{
		"ca_file":   certs.CAFile,
		"cert_file": certs.ClientCertFile,
		"key_file":  certs.ClientKeyFile,
	}
	with := func(changes map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range full {
			m[k] = v
		}
		for k, v := range changes {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}

	for _, tc := range []struct {
		name  string
		extra map[string]any
	}{
		{"rediss address", map[string]any{"addrs": []string{fmt.Sprintf("rediss://127.0.0.1:%d", port)}, "tls": full}},
		{"tls setting", map[string]any{"addrs": []string{srv.Addr()}, "tls": full}},
		{"server name", map[string]any{"addrs": []string{srv.Addr()}, "tls": with(map[string]any{"server_name": certs.ServerName})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.extra["key_prefix"] = t.Name() + ":"
			w := openWorker(t, config("e", tc.extra, "a", "b"))
			req := request("r", 7, 2*blockSize)
			save(t, w, req, 2*blockSize, "a", "b")
			for _, l := range []string{"a", "b"} {
				kvData, err := w.LoadLayer(t.Context(), req, l, 2*blockSize)
				require.NoError(t, err)
				assert.Equal(t, kvOf(req, l, 2*blockSize), kvData)
			}
		})
	}

	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  string
	}{
		{"no TLS", map[string]any{"addrs": []string{srv.Addr()}}, ""},
		{"system roots only", map[string]any{"addrs": []string{srv.Addr()}, "tls": with(map[string]any{"ca_file": nil})}, "certificate signed by unknown authority"},
		{"wrong server name", map[string]any{"addrs": []string{srv.Addr()}, "tls": with(map[string]any{"server_name": "other.kvgen.test"})}, "other.kvgen.test"},
		{"no client certificate", map[string]any{"addrs": []string{srv.Addr()}, "tls": with(map[string]any{"cert_file": nil, "key_file": nil})}, "certificate required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.extra["dial_timeout"] = "2s"
			tc.extra["read_timeout"] = "2s"
			_, err := redis.New(t.Context(), config("e", tc.extra), kv.RoleWorker)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "redis at "+srv.Addr())
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
