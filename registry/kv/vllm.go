package kv

import (
	"fmt"
	"slices"

	"github.com/kvgen/kvgen/internal/names"
	"github.com/kvgen/kvgen/internal/suggest"
)

// vllmConnector is one of the connectors vLLM ships, by the name its
// KVConnectorFactory registers.
type vllmConnector struct {
	// what it does, for messages.
	what string
	// Where this package has a connector that does the same, its
	// constructor's import path and name.
	importPath, constructor string
}

// registryImport is this package's import path.
const registryImport = "github.com/kvgen/kvgen/registry/kv"

// vllmConnectors are the names vLLM's KVConnectorFactory registers (older
// names included), so that a vLLM user's name gets a helpful error rather
// than a bare "unknown".
var vllmConnectors = map[string]vllmConnector{
	"ExampleConnector":       {"its example connector that shares KV through files", "", ""},
	"SharedStorageConnector": {"its example connector that shares KV through files (now ExampleConnector)", "", ""},
	"MultiConnector":         {"its composite connector", registryImport, multiConstructor},
	"OffloadingConnector":    {"its connector that offloads KV to CPU memory", "", ""},
	"NixlConnector":          {"its NIXL transfer connector", "", ""},
	"P2pNcclConnector":       {"its peer-to-peer NCCL connector", "", ""},
	"LMCacheConnectorV1":     {"its LMCache connector", "", ""},
	"LMCacheMPConnector":     {"its multi-process LMCache connector", "", ""},
	"MooncakeConnector":      {"its Mooncake transfer connector", "", ""},
	"MoRIIOConnector":        {"its MoRI-IO transfer connector", "", ""},
	"FlexKVConnectorV1":      {"its FlexKV connector", "", ""},
	"DecodeBenchConnector":   {"its decode benchmarking connector", "", ""},
}

// vllmHint says what to do about name when it is one of vLLM's own
// connectors and not linked into r, or returns "".
func (r *Registry) vllmHint(name string) string {
	v, ok := vllmConnectors[name]
	if !ok {
		return ""
	}
	msg := fmt.Sprintf("%s is vLLM's name for %s", name, v.what)
	if v.importPath == "" {
		return msg + fmt.Sprintf(", which is Python and cannot be linked into a Go binary; "+
			"to serve the name, add a Go connector to connectors.yaml as - {name: %s, import: IMPORT/PATH} "+
			"or give a linked one the alias (aliases: [%s]), and regenerate", name, name)
	}
	// A linked entry of the same package only lacks the alias.
	entries := r.table.Entries()
	i := slices.IndexFunc(entries, func(e Entry) bool {
		return e.ImportPath == v.importPath && (e.Constructor == "" || e.Constructor == v.constructor)
	})
	if i >= 0 {
		e := entries[i]
		return msg + fmt.Sprintf("; kvgen's %q connector does the same and is linked: use \"kv_connector\": %q, "+
			"or add %s to its aliases in connectors.yaml (aliases: [%s]) and regenerate",
			e.Name, e.Name, name, name)
	}
	return msg + fmt.Sprintf("; kvgen's %s.%s does the same: to link it, add - {name: %s, import: %s, constructor: %s} "+
		"to connectors.yaml and regenerate", v.importPath, v.constructor, name, v.importPath, v.constructor)
}

// ModulePathError is the error for a transfer config that sets
// kv_connector_module_path: vLLM imports a Python module named there at run
// time, while kvgen links every connector when the binary is built.
type ModulePathError struct {
	// Connector is the config's kv_connector, or "".
	Connector string
	// ModulePath is the Python module path the config names.
	ModulePath string
}

// Error explains that Go links connectors at build time and shows the
// manifest entry that would link this one.
func (e *ModulePathError) Error() string {
	name := e.Connector
	if name == "" {
		name = "NAME"
	} else if !names.Valid(name) {
		name = suggest.Quote(name) // a YAML string, and no raw control character
	}
	return fmt.Sprintf("kv_connector_module_path %s: a Go binary cannot load connectors at run time, "+
		"kvgen links them when it is built; add the connector's Go package to connectors.yaml as "+
		"- {name: %s, import: IMPORT/PATH}, regenerate and rebuild, and leave kv_connector_module_path out",
		quoted(e.ModulePath), name)
}
