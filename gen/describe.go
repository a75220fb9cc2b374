package gen

import (
	"path/filepath"

	"github.com/kvgen/kvgen/internal/inspect"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/registry/kv"
)

// describe is the description of the manifest and its checked entries that
// the registry file embeds, for kvgen inspect to read from a binary. It
// names the manifest by its file name alone, so that where kvgen ran from
// does not change the binary.
func describe(m *manifest.Manifest, contract *Contract, importPath string, entries []*Entry) (string, error) {
	d := inspect.Description{
		Manifest:       filepath.Base(m.File),
		ManifestSHA256: m.SHA256,
		Package:        importPath,
		Connectors:     make([]inspect.Connector, len(entries)),
	}
	if !contract.KV() {
		d.Factory = contract.String()
	}
	for i, e := range entries {
		c := inspect.Connector{Name: e.Name, Aliases: e.Aliases, Import: e.ImportPath, Constructor: e.Constructor, Module: e.Module}
		c.Roles = contract.RolesOf(e)
		d.Connectors[i] = c
	}
	return inspect.Encode(d)
}

// RolesOf returns the names of the roles e serves: those its manifest
// entry lists, or every role the contract declares when it lists none.
// It is nil for a contract without roles.
func (c *Contract) RolesOf(e *Entry) []string {
	if !c.KV() {
		return nil
	}
	if e.Roles != nil {
		return e.Roles
	}
	var names []string
	for _, r := range kv.Roles() {
		names = append(names, r.String())
	}
	return names
}
