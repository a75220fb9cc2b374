package gen

import (
	"path/filepath"

	"github.com/kvgen/kvgen/internal/inspect"
	"github.com/kvgen/kvgen/internal/manifest"
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
		Entries:        make([]inspect.Entry, len(entries)),
	}
	if c := contract.String(); c != DefaultFactory {
		d.Factory = c
	}
	for i, e := range entries {
		c := inspect.Entry{Name: e.Name, Aliases: e.Aliases, Import: e.ImportPath, Constructor: e.Constructor, Module: e.Module}
		c.Roles = contract.RolesOf(e)
		d.Entries[i] = c
	}
	return inspect.Encode(d)
}
