package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/connectors/filesystem"
	"github.com/kvgen/kvgen/registry"
)

// datacenterRegistry links what examples/deploy/datacenter.yaml links but
// Redis, which needs a server: no memory connector.
func datacenterRegistry() *registry.Registry {
	return registry.MustNew(
		registry.Entry{Name: "filesystem", Aliases: []string{"ExampleConnector"}, ImportPath: filesystemImport, Constructor: "New", Factory: registry.Adapt(filesystem.New)},
		registry.Entry{Name: registry.MultiConnectorName, ImportPath: "github.com/kvgen/kvgen/registry", Constructor: "NewMultiConnector", Factory: registry.NewMultiConnector},
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
	reg := registry.MustNew(append(datacenterRegistry().Entries(), e)...)
	code, out, stderr := runWith(t, reg)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `through "memory"`)

	// A build linking only a composite has no default to run, and says so.
	only := registry.MustNew(registry.Entry{Name: registry.MultiConnectorName, ImportPath: "github.com/kvgen/kvgen/registry", Constructor: "NewMultiConnector", Factory: registry.NewMultiConnector})
	code, _, stderr = runWith(t, only)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "kv_connector")
}
