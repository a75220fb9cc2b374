package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/connectors/filesystem"
	"github.com/kvgen/kvgen/registry/kv"
)

// datacenterRegistry links what examples/deploy/datacenter.yaml links but
// Redis, which needs a server: no memory connector.
func datacenterRegistry() *kv.Registry {
	return kv.MustNew(
		kv.Entry{Name: "filesystem", Aliases: []string{"ExampleConnector"}, ImportPath: filesystemImport, Constructor: "New", Factory: kv.Adapt(filesystem.New)},
		kv.Entry{Name: kv.MultiConnectorName, ImportPath: "github.com/kvgen/kvgen/registry/kv", Constructor: "NewMultiConnector", Factory: kv.NewMultiConnector},
	)
}

// A build that does not link the memory connector still runs with no
// arguments, and its prefill and decode, run one after the other with no
// arguments, hand KV over.
func TestDefaultConnectorIsOneTheBuildLinks(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	reg := datacenterRegistry()

	code, out, stderr := runWith(t, reg)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `loaded 96 tokens and recomputed 4 of 100 through "filesystem"`)

	code, out, stderr = runWith(t, reg, "-json", "-prompt", "another prompt", "prefill")
	require.Equal(t, 0, code, stderr)
	var p prefillReport
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	assert.Equal(t, 96, p.Saved)
	code, out, stderr = runWith(t, reg, "-json", "-prompt", "another prompt", "decode")
	require.Equal(t, 0, code, stderr)
	var d decodeReport
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Equal(t, 96, d.Loaded)
	assert.DirExists(t, filepath.Join(tmp, "kvserver-kv"), "the default directory is under TMPDIR")

	code, _, stderr = runWith(t, reg, "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, "default: the filesystem connector in "+filepath.Join(tmp, "kvserver-kv"))
}

// Where memory is linked it is the default, wherever the manifest lists it.
func TestDefaultConnectorIsMemoryWhereLinked(t *testing.T) {
	e, ok := Registry.Lookup("memory")
	require.True(t, ok)
	reg := kv.MustNew(append(datacenterRegistry().Entries(), e)...)
	code, out, stderr := runWith(t, reg)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `through "memory"`)

	// A build linking only a composite has no default to run, and says so.
	only := kv.MustNew(kv.Entry{Name: kv.MultiConnectorName, ImportPath: "github.com/kvgen/kvgen/registry/kv", Constructor: "NewMultiConnector", Factory: kv.NewMultiConnector})
	code, _, stderr = runWith(t, only)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "kv_connector")
}

// kvserver's bound on a layer reaches every filesystem connector a config
// creates, by any of its names and inside a MultiConnector, and leaves a
// setting of the operator's own and other connectors alone.
func TestBoundLayersReachesEveryFilesystemConnector(t *testing.T) {
	cfg, err := kv.ParseTransferConfig([]byte(`{"kv_connector":"MultiConnector","kv_connector_extra_config":{"connectors":[
		{"kv_connector":"memory","kv_connector_extra_config":{}},
		{"kv_connector":"SharedStorageConnector","kv_connector_extra_config":{"shared_storage_path":"a"}},
		{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":"b","max_bytes_per_token":4096}},
		{"kv_connector":"MultiConnector","kv_connector_extra_config":{"connectors":[
			{"kv_connector":"ExampleConnector","kv_connector_extra_config":{"shared_storage_path":"c"}}]}}]}}`))
	require.NoError(t, err)
	boundLayers(Registry, cfg.Connector, cfg.Extra)
	children := cfg.Extra["connectors"].([]any)
	settings := func(c any) map[string]any {
		return c.(map[string]any)["kv_connector_extra_config"].(map[string]any)
	}
	assert.NotContains(t, settings(children[0]), "max_bytes_per_token")
	assert.Equal(t, kvBytesPerToken, settings(children[1])["max_bytes_per_token"])
	assert.Equal(t, "4096", fmt.Sprint(settings(children[2])["max_bytes_per_token"]))
	nested := settings(children[3])["connectors"].([]any)
	assert.Equal(t, kvBytesPerToken, settings(nested[0])["max_bytes_per_token"])
	assert.NotContains(t, cfg.Extra, "max_bytes_per_token", "not on MultiConnector itself")
}
