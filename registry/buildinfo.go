package registry

import (
	"runtime/debug"

	"github.com/kvgen/kvgen/internal/buildinfo"
)

// fillVersions sets each entry's Version that the generated code left
// empty from the build info of the running binary: the authoritative record
// of which module versions were linked.
func (r *Registry) fillVersions() {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	for i := range r.entries {
		e := &r.entries[i]
		if e.Version == "" {
			e.Version = buildinfo.ModuleVersion(info, e.Module)
		}
	}
}
