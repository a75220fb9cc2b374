package deploy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/pipeline"
)

// kvContract is the KV connector contract with the markers its package's
// source declares, read as kvgen build -for reads them.
func kvContract(t *testing.T) *gen.Contract {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	c, err := pipeline.ReadMarkers(context.Background(), pipeline.Options{WorkDir: root, Env: os.Environ()}, "")
	require.NoError(t, err)
	require.NotNil(t, c.Select, "registry/kv's Factory declares how a transfer config selects connectors")
	return c
}

// loadManifest writes src as connectors.yaml in a directory of its own and
// loads it.
func loadManifest(t *testing.T, src string) *manifest.Manifest {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "connectors.yaml"), []byte(src), 0o644))
	m, err := manifest.LoadIn(dir, "connectors.yaml")
	require.NoError(t, err)
	return m
}

const kvManifest = `version: 1
connectors:
  - name: filesystem
    import: github.com/kvgen/kvgen/examples/connectors/filesystem
    constructor: New
    aliases: [SharedStorageConnector]
  - name: memory
    import: github.com/kvgen/kvgen/examples/connectors/memory
  - name: MultiConnector
    import: github.com/kvgen/kvgen/registry/kv
    constructor: NewMultiConnector
`

// nested is a config of MultiConnectors n deep around memory.
func nested(n int) string {
	cfg := `{"kv_connector": "memory"}`
	for range n {
		cfg = `{"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [` + cfg + `]}}`
	}
	return cfg
}

// A --kv-transfer-config selects, by the rule registry/kv declares, the
// connector it names and a MultiConnector's children, in the order it
// names them; its problems are named.
func TestEntriesForKV(t *testing.T) {
	c := kvContract(t)
	m := loadManifest(t, kvManifest)
	for _, tc := range []struct {
		name, config string
		want         []string
		err          string
	}{
		{"one", `{"kv_connector": "memory", "kv_role": "kv_both"}`, []string{"memory"}, ""},
		{"alias", `{"kv_connector": "SharedStorageConnector", "kv_connector_extra_config": {"shared_storage_path": "kv"}}`, []string{"filesystem"}, ""},
		{"multi", `{"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [
			{"kv_connector": "memory"}, {"kv_connector": "filesystem"}, {"kv_connector": "memory"}]}}`,
			[]string{"MultiConnector", "memory", "filesystem"}, ""},
		{"nested", nested(9), []string{"MultiConnector", "memory"}, ""},
		{"too deep", nested(10), nil, "entries with children (MultiConnector) nest deeper than 8"},
		{"children of another connector are not read", `{"kv_connector": "memory", "kv_connector_extra_config": {"connectors": [{"kv_connector": "redis"}]}}`, []string{"memory"}, ""},
		{"missing", `{"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [
			{"kv_connector": "redis"}, {"kv_connector": "memory"}, {"kv_connector": "lmcache"}, {"kv_connector": "redis"}]}}`,
			nil, `the config creates "redis", "lmcache", which connectors.yaml does not list; add them to the manifest, or build from a manifest that has them`},
		{"unknown key", `{"kv_connector": "memory", "kv_rol": "kv_both"}`, nil, `unknown key "kv_rol" (did you mean "kv_role"?)`},
		{"child's unknown key", `{"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [{"kv_connector": "memory", "kv_rank": 0, "kv_rnak": 1}]}}`,
			nil, `kv_connector_extra_config.connectors[0]: unknown key "kv_rnak" (did you mean "kv_rank"?)`},
		{"no name", `{"kv_role": "kv_both"}`, nil, "kv_connector is required"},
		{"empty name", `{"kv_connector": ""}`, nil, "kv_connector is required"},
		{"name not a string", `{"kv_connector": 7}`, nil, "kv_connector: want a string, got a number"},
		{"child without a name", `{"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [{"kv_connector": "memory"}, {}]}}`,
			nil, "kv_connector_extra_config.connectors[1]: kv_connector is required"},
		{"no children", `{"kv_connector": "MultiConnector"}`, nil, "kv_connector_extra_config.connectors: want a list of at least one config, got null"},
		{"children not a list", `{"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": {"kv_connector": "memory"}}}`,
			nil, "kv_connector_extra_config.connectors: want a list of at least one config, got an object"},
		{"child not an object", `{"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": ["memory"]}}`,
			nil, "kv_connector_extra_config.connectors[0]: want a JSON object, got a string"},
		{"not an object", `["memory"]`, nil, "want a JSON object, got a list"},
		{"not JSON", "{\n  \"kv_connector\": memory}", nil, "line 2, column 19: invalid character 'm' looking for beginning of value"},
		{"too big", `{"kv_connector": "memory", "engine_id": "` + strings.Repeat("x", 1<<20) + `"}`, nil, "1048619 bytes: want at most 1 MiB (1048576 bytes); a config is a few hundred"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := entriesFor(m, c, []byte(tc.config))
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// A contract of any kind selects by the rule it declares; one that
// declares none is told so, with an error that wraps ErrNoSelect.
func TestEntriesForAnyContract(t *testing.T) {
	m := loadManifest(t, `version: 1
factory: example.com/plug.Factory
connectors:
  - name: gzip
    import: example.com/plug/gzip
  - name: chain
    import: example.com/plug/chain
`)
	// Without multi=, any config that has the children's path lists them.
	c := &gen.Contract{Path: "example.com/plug", Name: "Factory", Select: &gen.Select{Name: "use.plugin", Children: "then"}}
	got, err := entriesFor(m, c, []byte(`{"use": {"plugin": "chain"}, "then": [{"use": {"plugin": "gzip"}, "level": 9}]}`))
	require.NoError(t, err)
	require.Equal(t, []string{"chain", "gzip"}, got)
	got, err = entriesFor(m, c, []byte(`{"use": {"plugin": "gzip"}}`))
	require.NoError(t, err)
	require.Equal(t, []string{"gzip"}, got)

	c.Select = nil
	_, err = entriesFor(m, c, []byte(`{"use": {"plugin": "gzip"}}`))
	require.True(t, errors.Is(err, ErrNoSelect))
	require.EqualError(t, err, "the contract example.com/plug.Factory declares no rule for selecting entries from a config (with a //kvgen:select line); list what this deployment links in connectors.yaml instead")
}
