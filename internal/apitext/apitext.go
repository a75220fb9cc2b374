// Package apitext writes the exported API of kvgen's public packages as
// text, one sorted line per exported declaration in the form of Go's own
// api/*.txt files, so that a change of API is a diff of the files in Dir.
//
// A package is public when it is in the root module, has non-test Go
// files, and its path within the module has no internal element and is
// not under cmd/ or examples/. The list is computed, not kept, so the
// files follow packages as they move.
package apitext

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/tools/go/packages"
)

// Dir is the directory, relative to the module root, of the API files.
const Dir = "api"

// Package is the API text of one package.
type Package struct {
	Path  string   // import path
	Lines []string // one per exported declaration, sorted
}

// Load returns the API of the public packages of the module whose root
// is dir, sorted by import path.
func Load(dir string) ([]Package, error) {
	modPath, err := modulePath(dir)
	if err != nil {
		return nil, err
	}
	paths, err := publicPaths(dir, modPath)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, nil
	}
	// NeedTypes without NeedSyntax reads the compiler's export data,
	// which is faster than type-checking the sources.
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes, Dir: dir, Env: env()}
	pkgs, err := packages.Load(cfg, paths...)
	if err != nil {
		return nil, err
	}
	var errs []error
	var api []Package
	for _, p := range pkgs {
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("%s: %v", p.PkgPath, e))
		}
		if p.Types != nil && len(p.Errors) == 0 {
			api = append(api, Package{Path: p.PkgPath, Lines: Lines(p.Types)})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(api, func(a, b Package) int { return strings.Compare(a.Path, b.Path) })
	return api, nil
}

// env fixes the platform, so that the text does not depend on the
// machine that computes it.
func env() []string {
	return append(os.Environ(), "GOOS=linux", "GOARCH=amd64")
}

func modulePath(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	p := modfile.ModulePath(data)
	if p == "" {
		return "", fmt.Errorf("%s: no module path", filepath.Join(dir, "go.mod"))
	}
	return p, nil
}

// publicPaths lists the public packages of module modPath in dir. It asks
// only for file lists, so nothing is compiled for the packages left out.
func publicPaths(dir, modPath string) ([]string, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedModule, Dir: dir, Env: env()}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range pkgs {
		// A package of only tests has no GoFiles (and an error saying so).
		if p.Module == nil || p.Module.Path != modPath || len(p.GoFiles) == 0 {
			continue
		}
		if Public(modPath, p.PkgPath) {
			paths = append(paths, p.PkgPath)
		}
	}
	slices.Sort(paths)
	return paths, nil
}

// Public reports whether pkgPath, a package of module modPath, is public
// by its path: no internal element, and not under cmd/ or examples/.
func Public(modPath, pkgPath string) bool {
	rel, ok := relPath(modPath, pkgPath)
	if !ok {
		return false
	}
	elems := strings.Split(rel, "/")
	if elems[0] == "cmd" || elems[0] == "examples" {
		return false
	}
	return !slices.Contains(elems, "internal")
}

// relPath is pkgPath within module modPath, "" for the module's root.
func relPath(modPath, pkgPath string) (string, bool) {
	if pkgPath == modPath {
		return "", true
	}
	rel, ok := strings.CutPrefix(pkgPath, modPath+"/")
	return rel, ok
}

// FileName is the name, in Dir, of the API file of package pkgPath of
// module modPath: its path in the module with "/" as "_", so gen/deploy
// is gen_deploy.txt; the module's root package is named for the module.
func FileName(modPath, pkgPath string) string {
	rel, ok := relPath(modPath, pkgPath)
	if !ok {
		rel = pkgPath
	}
	if rel == "" {
		rel = path.Base(modPath)
	}
	return strings.ReplaceAll(rel, "/", "_") + ".txt"
}

// Files computes the API files of the module whose root is dir: the
// content of each, by name in Dir.
func Files(dir string) (map[string]string, error) {
	modPath, err := modulePath(dir)
	if err != nil {
		return nil, err
	}
	api, err := Load(dir)
	if err != nil {
		return nil, err
	}
	files := make(map[string]string, len(api))
	owner := make(map[string]string, len(api))
	for _, p := range api {
		name := FileName(modPath, p.Path)
		// "a/b_c" and "a_b/c" would share a file.
		if other, dup := owner[name]; dup {
			return nil, fmt.Errorf("packages %s and %s would share the API file %s", other, p.Path, name)
		}
		owner[name] = p.Path
		var b strings.Builder
		for _, l := range p.Lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		files[name] = b.String()
	}
	return files, nil
}

// ReadFiles reads the API files in Dir of the module whose root is dir;
// none when Dir does not exist.
func ReadFiles(dir string) (map[string]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, Dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	files := make(map[string]string, len(names))
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		files[filepath.Base(n)] = string(data)
	}
	return files, nil
}

// WriteFiles makes Dir of the module whose root is dir hold exactly files:
// it writes each one that differs and removes the .txt files of packages
// that are no longer public.
func WriteFiles(dir string, files map[string]string) error {
	old, err := ReadFiles(dir)
	if err != nil {
		return err
	}
	apiDir := filepath.Join(dir, Dir)
	if err := os.MkdirAll(apiDir, 0o755); err != nil {
		return err
	}
	for name, content := range files {
		if o, ok := old[name]; ok && o == content {
			continue
		}
		if err := os.WriteFile(filepath.Join(apiDir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	for name := range old {
		if _, ok := files[name]; !ok {
			if err := os.Remove(filepath.Join(apiDir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Diff tells how the committed API files differ from the computed ones,
// file by file, as the lines removed ("-") and added ("+"); "" when they
// are the same.
func Diff(committed, computed map[string]string) string {
	var names []string
	for n := range committed {
		names = append(names, n)
	}
	for n := range computed {
		if _, ok := committed[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		old, inOld := committed[n]
		cur, inCur := computed[n]
		if inOld && inCur && old == cur {
			continue
		}
		title := Dir + "/" + n + ":"
		switch {
		case !inOld:
			title = Dir + "/" + n + ": new public package"
		case !inCur:
			title = Dir + "/" + n + ": no longer a public package"
		}
		b.WriteString(title + "\n")
		removed, added := lineDiff(lines(old), lines(cur))
		for _, l := range removed {
			b.WriteString("-" + l + "\n")
		}
		for _, l := range added {
			b.WriteString("+" + l + "\n")
		}
		if inOld && inCur && len(removed) == 0 && len(added) == 0 {
			// Same lines, different bytes: an edit by hand.
			b.WriteString("(same declarations, but not in the form the test writes)\n")
		}
	}
	return b.String()
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// lineDiff returns the lines of old not in cur, and of cur not in old;
// each line is a declaration, so a set difference is the whole story.
func lineDiff(old, cur []string) (removed, added []string) {
	inOld := make(map[string]bool, len(old))
	for _, l := range old {
		inOld[l] = true
	}
	inCur := make(map[string]bool, len(cur))
	for _, l := range cur {
		inCur[l] = true
	}
	for _, l := range old {
		if !inCur[l] {
			removed = append(removed, l)
		}
	}
	for _, l := range cur {
		if !inOld[l] {
			added = append(added, l)
		}
	}
	slices.Sort(removed)
	slices.Sort(added)
	return slices.Compact(removed), slices.Compact(added)
}
