package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// FuzzTransferConfig drives kvserver's whole config path with any bytes:
// ParseTransferConfig, then, for every connector the binary links, each
// role created through the generated Registry (which decodes the
// connector's settings) and closed. No input may panic the host or hang
// it, and every error is at most MaxProblems lines (and a count) of
// printable text. Storage paths are moved into a temporary directory, so
// that inputs write nowhere else; nothing linked dials the network.
func FuzzTransferConfig(f *testing.F) {
	for _, s := range []string{
		`{"kv_connector":"memory"}`,
		`{"kv_connector":"ExampleConnector","kv_connector_extra_config":{"shared_storage_path":"kv-demo"}}`,
		`{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":"fs1","stale_temp_seconds":9300000000}}`,
		`{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":"fs1","stale_temp_seconds":9223372036854775807}}`,
		`{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":"fs1","max_layer_bytes":9223372036854775807,"durability":"full"}}`,
		`{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":"fs1","max_bytes_per_token":0,"max_layer_bytes":1}}`,
		`{"kv_connector":"memory","kv_connector_extra_config":{"capacity_bytes":-1,"store":"\u001b[2J\n"}}`,
		`{"kv_connector":"MultiConnector","block_size":32,"kv_connector_extra_config":{"connectors":[` +
			`{"kv_connector":"memory","kv_connector_extra_config":{"store":"a"}},` +
			`{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":"fs2","stale_temp_seconds":1}}]}}`,
		`{"kv_connector":"MultiConnector","kv_connector_extra_config":{"connectors":[{"kv_connector":"MultiConnector",` +
			`"kv_connector_extra_config":{"connectors":[{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":1}}]}}]}}`,
		`{"kv_connector":"SharedStorageConnector","kv_role":"kv_producer","kv_port":"14579","kv_buffer_size":"1e9","layer_names":["a",""]}`,
		`{"kv_connector":"NixlConnector","kv_connector_module_path":"x.y","block_size":1e6}`,
		`{"kv_connector":"memory",` + strings.Repeat(`"kv_por":1,`, 20) + `"x":1}`,
		`[]`, `null`, `{`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := kv.ParseTransferConfig(data)
		if err != nil {
			assertCleanError(t, err)
			return
		}
		dir := t.TempDir()
		n := 0
		cfg.Extra, _ = confine(cfg.Extra, dir, &n).(map[string]any)
		// A deadline bounds construction, should a connector ever wait.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		for _, name := range append(Registry.Names(), cfg.Connector) {
			c := cfg
			c.Connector = name
			for _, role := range kv.Roles() {
				conn, err := Registry.Create(ctx, c, role)
				if err != nil {
					assertCleanError(t, err)
					continue
				}
				require.NoError(t, conn.Close(), "%s (%s)", name, role)
			}
		}
		require.NoError(t, ctx.Err(), "creating the connectors took too long")
	})
}

// confine returns v with every shared_storage_path that is a string, at any
// depth (MultiConnector's children), replaced by a directory under dir.
func confine(v any, dir string, n *int) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if _, ok := e.(string); ok && k == "shared_storage_path" {
				*n++
				out[k] = filepath.Join(dir, strconv.Itoa(*n))
				continue
			}
			out[k] = confine(e, dir, n)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = confine(e, dir, n)
		}
		return out
	}
	return v
}

// assertCleanError checks that err is a bounded list of printable lines.
func assertCleanError(t *testing.T, err error) {
	t.Helper()
	lines := strings.Split(err.Error(), "\n")
	assert.LessOrEqual(t, len(lines), kv.MaxProblems+1, "too many lines: %.500q", err.Error())
	for _, line := range lines {
		assert.LessOrEqual(t, len(line), 2048, "a line echoes too much: %.300q", line)
		for _, r := range line {
			if !strconv.IsPrint(r) {
				assert.Fail(t, fmt.Sprintf("%q reaches the terminal raw in %.300q", r, line))
				return
			}
		}
	}
}
