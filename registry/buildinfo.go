package registry

import "runtime/debug"

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
			e.Version = ModuleVersion(info, e.Module)
		}
	}
}

// ModuleVersion returns the version of module path in info: the main
// module's version, a dependency's version, the version of its replacement,
// "v0.1.0 => ./dir" for a replacement by a local directory, or "" if the
// module is not linked.
func ModuleVersion(info *debug.BuildInfo, path string) string {
	if path == "" || info == nil {
		return ""
	}
	if info.Main.Path == path {
		return info.Main.Version
	}
	for _, m := range info.Deps {
		if m.Path != path {
			continue
		}
		if m.Replace != nil {
			// A directory replacement has no version of its own; the go
			// command records it as "(devel)". Show what was required and
			// where it came from instead.
			if v := m.Replace.Version; v != "" && v != "(devel)" {
				return v
			}
			return m.Version + " => " + m.Replace.Path
		}
		return m.Version
	}
	return ""
}
