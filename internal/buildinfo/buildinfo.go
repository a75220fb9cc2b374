// Package buildinfo reads which module versions a binary links from its
// build information, as the registry and kvgen version report them.
package buildinfo

import (
	"runtime/debug"
	"slices"
)

// ModuleVersion returns the version of module path in info: the main
// module's version, a dependency's version, the version of its replacement,
// "v0.1.0 => ./dir" for a replacement by a local directory, or "" if the
// module is not linked. The main module has a replacement too when the
// binary is a tool that go tool built from a replaced module.
func ModuleVersion(info *debug.BuildInfo, path string) string {
	if path == "" || info == nil {
		return ""
	}
	m := &info.Main
	if m.Path != path {
		i := slices.IndexFunc(info.Deps, func(d *debug.Module) bool { return d.Path == path })
		if i < 0 {
			return ""
		}
		m = info.Deps[i]
	}
	if r := m.Replace; r != nil {
		// A directory replacement has no version of its own; the go
		// command records it as "(devel)". Show what was required and
		// where it came from instead.
		if v := r.Version; v != "" && v != "(devel)" {
			return v
		}
		return m.Version + " => " + r.Path
	}
	return m.Version
}
