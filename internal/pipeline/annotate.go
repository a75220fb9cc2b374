package pipeline

import (
	"fmt"
	"strings"
)

// Annotate prefixes each line of a go command's output that names an
// entry's import path or module with the entry's manifest position.
func (r *Result) Annotate(out string) string {
	modules := r.entryModules()
	m := r.manifest
	var lines []string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		best, bestIdx := "", -1
		for i, c := range m.Entries {
			for _, p := range []string{c.Import.V, modules[c.Import.V]} {
				if p != "" && len(p) > len(best) && mentions(line, p) {
					best, bestIdx = p, i
				}
			}
		}
		if bestIdx >= 0 {
			c := m.Entries[bestIdx]
			line = fmt.Sprintf("%s: %s: %s", c.Import.Pos, c.Label(bestIdx), line)
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// mentions reports whether line names path as a whole path, not as the
// prefix of a longer one (github.com/x/foo in github.com/x/foobar).
func mentions(line, path string) bool {
	for i := 0; ; {
		j := strings.Index(line[i:], path)
		if j < 0 {
			return false
		}
		end := i + j + len(path)
		if end == len(line) || strings.ContainsRune("/@: \t\"'", rune(line[end])) {
			return true
		}
		i = end
	}
}

// entryModules are the module paths of the entries' packages, by import
// path: from the entries checked, or, on a warm hit, from the record.
func (r *Result) entryModules() map[string]string {
	if r.fromWarm {
		return r.modules
	}
	modules := map[string]string{}
	for _, e := range r.Entries {
		modules[e.ImportPath] = e.Module
	}
	return modules
}
