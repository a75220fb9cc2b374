package link

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/readfile"
)

// Vendored reports whether the go command, run in the main module with
// env, builds it from its vendor directory: as the go command decides,
// when -mod=vendor is among the GOFLAGS of env, or when they set no -mod
// and the module has a vendor directory, its go.mod says go 1.14 or
// later, and no go.work puts the go command in workspace mode (where the
// workspace's vendor directory is the go command's affair). env holds
// GOFLAGS as the go command would take them (see gocmd.ReadOnlyModules).
func (m *Main) Vendored(env []string) bool {
	for _, f := range strings.Fields(gocmd.Lookup(env, "GOFLAGS")) {
		if name, value, _ := strings.Cut(strings.TrimLeft(f, "-"), "="); name == "mod" {
			return value == "vendor"
		}
	}
	if fi, err := os.Stat(filepath.Join(m.Dir, "vendor")); err != nil || !fi.IsDir() {
		return false
	}
	if gocmd.WorkFile(m.Dir, env) != "" {
		return false
	}
	return m.file.Go != nil && semver.Compare("v"+m.file.Go.Version, "v1.14") >= 0
}

// modulesTxt is the path of the main module's vendor/modules.txt.
func (m *Main) modulesTxt() string {
	return filepath.Join(m.Dir, "vendor", "modules.txt")
}

// vendorLacks lists, in go.mod's terms, what vendor/modules.txt lacks of
// goMod, the main module's go.mod as it is (nil) or is to be: each module
// goMod requires, at that version, marked as required explicitly, and
// replaced as goMod replaces it, as go mod vendor records them. The go
// command refuses to build from a vendor directory that lacks any of it.
func (m *Main) vendorLacks(goMod []byte) ([]string, error) {
	f := m.file
	if goMod != nil {
		var err error
		if f, err = modfile.Parse(m.GoMod, goMod, nil); err != nil {
			return nil, err
		}
	}
	txt, err := readfile.Read(m.modulesTxt(), readfile.Max)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	type vendored struct {
		version, replace string
		explicit         bool
	}
	have := map[string]*vendored{}
	var last *vendored
	sc := bufio.NewScanner(bytes.NewReader(txt))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			if last != nil {
				for _, mark := range strings.Split(strings.TrimPrefix(line, "## "), ";") {
					last.explicit = last.explicit || strings.TrimSpace(mark) == "explicit"
				}
			}
		case strings.HasPrefix(line, "# "):
			last = nil
			old, replace, _ := strings.Cut(strings.TrimPrefix(line, "# "), "=>")
			fields := strings.Fields(old)
			if len(fields) != 2 {
				continue // a replacement of every version: not a module of the build
			}
			last = &vendored{version: fields[1], replace: strings.Join(strings.Fields(replace), " ")}
			have[fields[0]] = last
		}
	}
	main := &Main{file: f}
	var lacks []string
	for _, r := range f.Require {
		want := r.Mod.Path + " " + r.Mod.Version
		repl := replacement(main, r.Mod.Path, r.Mod.Version)
		if repl != "" {
			want += " => " + repl
		}
		v := have[r.Mod.Path]
		switch {
		case v == nil:
			lacks = append(lacks, want)
		case v.version != r.Mod.Version || v.replace != repl:
			got := v.version
			if v.replace != "" {
				got += " => " + v.replace
			}
			lacks = append(lacks, fmt.Sprintf("%s (it has %s)", want, got))
		case !v.explicit:
			lacks = append(lacks, want+" (it has it only as a dependency of another module)")
		}
	}
	return lacks, nil
}

// VendorError is a vendor directory that lacks modules go.mod requires:
// the go command builds from it and refuses to until go mod vendor
// records them.
type VendorError struct {
	// modulesTxt is vendor/modules.txt, and Dir the main module's
	// directory, as messages show them.
	modulesTxt, Dir string
	// Lacks are what it lacks, as Main.vendorLacks says them.
	Lacks []string
	// Packages, when it lacks no module, are the entries whose packages
	// it lacks, each at its entry: go mod vendor copies only the
	// packages the main module imports, so it copies them once the
	// registry file does.
	Packages diag.List
	// Written says that go.mod and go.sum were written before.
	Written bool
}

func (e *VendorError) Error() string {
	in := ""
	if e.Dir != "." && e.Dir != "" {
		in = " in " + e.Dir
	}
	if len(e.Lacks) == 0 {
		return fmt.Sprintf("%s lacks packages the registry file imports, of modules go.mod requires; the go command builds from vendor/, so run go mod vendor%s", e.modulesTxt, in)
	}
	what := "go.mod requires"
	if e.Written {
		what = "go.mod now requires"
	}
	return fmt.Sprintf("%s lacks what %s: %s; the go command builds from vendor/, so run go mod vendor%s", e.modulesTxt, what, strings.Join(e.Lacks, ", "), in)
}
