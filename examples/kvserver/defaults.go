package main

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/kvgen/kvgen/registry/kv"
)

// Import paths of the reference connectors, by which kvserver knows them
// whatever name a deployment's manifest gives them.
const (
	memoryImport     = "github.com/kvgen/kvgen/examples/connectors/memory"
	filesystemImport = "github.com/kvgen/kvgen/examples/connectors/filesystem"
)

// defaultEntry is the connector kvserver runs without -kv-transfer-config:
// the memory connector where the build links it, else the first connector
// of the build's manifest that is not a composite (a MultiConnector needs
// its children named). Every build of kvserver thus runs with no arguments,
// whichever connectors its manifest links.
func defaultEntry(reg *kv.Registry) (kv.Entry, bool) {
	entries := reg.Entries()
	for _, e := range entries {
		if e.ImportPath == memoryImport {
			return e, true
		}
	}
	for _, e := range entries {
		if e.Name != kv.MultiConnectorName {
			return e, true
		}
	}
	return kv.Entry{}, false
}

// defaultConfig is the transfer config kvserver runs without
// -kv-transfer-config. The filesystem connector gets a directory under the
// temporary directory, so that a prefill and a decode run with no
// arguments hand KV over through it.
func defaultConfig(reg *kv.Registry) string {
	e, ok := defaultEntry(reg)
	if !ok {
		return `{"kv_connector":""}` // refused by the parser, which says why
	}
	cfg := map[string]any{"kv_connector": e.Name}
	if e.ImportPath == filesystemImport {
		cfg["kv_connector_extra_config"] = map[string]any{"shared_storage_path": defaultStoragePath()}
	}
	b, _ := json.Marshal(cfg) // strings and maps of strings: cannot fail
	return string(b)
}

// defaultStoragePath is the filesystem connector's directory when no config
// names one.
func defaultStoragePath() string { return filepath.Join(os.TempDir(), "kvserver-kv") }

// describeDefault says in -h what runs without -kv-transfer-config.
func describeDefault(reg *kv.Registry) string {
	e, ok := defaultEntry(reg)
	switch {
	case !ok:
		return "none: this build links no connector that runs without settings"
	case e.ImportPath == filesystemImport:
		return "the " + e.Name + " connector in " + defaultStoragePath()
	}
	return "the " + e.Name + " connector"
}

// boundLayers sets max_bytes_per_token, in the settings extra of a
// filesystem connector (the connector named, or a MultiConnector's child
// at any depth) that leave it out, to kvBytesPerToken: the size of a
// token's KV in kvserver's layers, so that a load allocates no more than
// the layer kvserver expects, whatever a file in the shared directory
// claims.
func boundLayers(reg *kv.Registry, connector string, extra map[string]any) {
	e, ok := reg.Lookup(connector)
	if !ok || extra == nil {
		return
	}
	switch {
	case e.ImportPath == filesystemImport:
		if _, set := extra["max_bytes_per_token"]; !set {
			extra["max_bytes_per_token"] = kvBytesPerToken
		}
	case e.Name == kv.MultiConnectorName:
		children, _ := extra["connectors"].([]any)
		for _, c := range children {
			child, _ := c.(map[string]any)
			name, _ := child["kv_connector"].(string)
			settings, _ := child["kv_connector_extra_config"].(map[string]any)
			boundLayers(reg, name, settings)
		}
	}
}
