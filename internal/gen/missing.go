package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/gofiles"
	"github.com/kvgen/kvgen/internal/gomod"
	"github.com/kvgen/kvgen/internal/suggest"
)

// errNoModule is the error of a package that no module of go.mod holds.
var errNoModule = errors.New("no module in go.mod provides it; give the entry version: (the module's version) or replace: (the directory of the module on this machine), and go generate adds the module to go.mod")

// explainMissing sets the error of each package that the go command found
// in no module (its Module is nil). It goes by go.mod's module paths, not
// by the go command's wording: when no module of go.mod could hold the
// import path, the module is missing; when one could, that module lacks
// the package, and the error says whether its directory is there without
// Go files, or which of the module's packages is nearest.
//
// mods are the modules go.mod requires, the main module first.
func explainMissing(ctx context.Context, lc loadConfig, mods []string, missing []*loadedPackage) {
	mainPath := mods[0]
	byModule := map[string][]*loadedPackage{}
	for _, lp := range missing {
		mod := gomod.ModuleOf(lp.pkg.PkgPath, mods)
		switch first, _, _ := strings.Cut(lp.pkg.PkgPath, "/"); {
		case mod == "" && !strings.Contains(first, "."):
			lp.err = packageErrors(lp.pkg, lc.dir, lc.workDir) // a standard library path: the go command says it is not in std
			continue
		case mod == "":
			lp.err = errNoModule
			continue
		}
		byModule[mod] = append(byModule[mod], lp)
	}
	if len(byModule) == 0 {
		return
	}
	dirs := moduleDirs(ctx, lc, byModule)
	rel := relativeTo(lc.workDir)
	for mod, lps := range byModule {
		for _, lp := range lps {
			lp.err = missingInModule(lp.pkg.PkgPath, mod, mod == mainPath, dirs[mod], rel)
			if lp.err == nil {
				lp.err = packageErrors(lp.pkg, lc.dir, lc.workDir) // keep the go command's words
			}
		}
	}
}

// moduleDirs asks the go command where each module's files are.
func moduleDirs(ctx context.Context, lc loadConfig, mods map[string][]*loadedPackage) map[string]string {
	args := append([]string{"list", "-m", "-e", "-json"}, lc.buildFlags()...)
	for m := range mods {
		args = append(args, m)
	}
	dirs := map[string]string{}
	out, _, err := gocmd.Run(ctx, lc.dir, lc.env(), args...)
	if err != nil {
		return dirs
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m struct{ Path, Dir string }
		if err := dec.Decode(&m); err != nil {
			if err != io.EOF {
				return map[string]string{}
			}
			return dirs
		}
		dirs[m.Path] = m.Dir
	}
}

// missingInModule explains why module mod, whose files are in dir, does
// not provide the package importPath; nil when it cannot tell.
func missingInModule(importPath, mod string, isMain bool, dir string, rel func(string) string) error {
	if dir == "" {
		return nil
	}
	which := "module " + mod
	if isMain {
		which = "the main module, " + mod + ","
	}
	sub := strings.TrimPrefix(strings.TrimPrefix(importPath, mod), "/")
	pkgDir := filepath.Join(dir, filepath.FromSlash(sub))
	if fi, err := os.Stat(pkgDir); err == nil && fi.IsDir() {
		src, tests, _ := gofiles.In(pkgDir)
		// The nearest go.mod above the package is its module's: one
		// below dir is a module nested in mod.
		switch nested := moduleRoot(pkgDir); {
		case strings.HasPrefix(nested, dir+string(filepath.Separator)):
			// The go command would say to go get it, which asks a
			// module proxy for a module that is only here.
			return fmt.Errorf("directory %s is in a module of its own (%s), which go.mod does not require; give the entry replace: with that module's directory, relative to the manifest", rel(pkgDir), rel(filepath.Join(nested, "go.mod")))
		case len(src) == 0 && len(tests) > 0:
			return fmt.Errorf("directory %s has only test files; a connector's package needs non-test Go files", rel(pkgDir))
		case len(src) == 0:
			return fmt.Errorf("directory %s has no Go files", rel(pkgDir))
		}
		return nil
	}
	e := &notInModuleError{module: mod, msg: fmt.Sprintf("%s has no such package", which)}
	if near := suggest.Nearest(sub, packagesIn(dir), 1); len(near) > 0 {
		e.msg += fmt.Sprintf("; did you mean %s?", path.Join(mod, near[0]))
	} else {
		// Not a typo of one of its packages: a module nested in it may
		// have the package, which only the main module could not.
		e.nested = !isMain
	}
	return e
}

// notInModuleError says that a module go.mod requires lacks a package
// under its path; nested, that a module nested in it may provide it.
type notInModuleError struct {
	module, msg string
	nested      bool
}

func (e *notInModuleError) Error() string { return e.msg }

// packagesIn lists the package directories of the module rooted at root,
// as slash-separated paths relative to it, skipping what the go command
// skips: testdata, vendor, names starting with . or _, and nested modules.
func packagesIn(root string) []string {
	var pkgs []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if p != root {
			n := d.Name()
			if n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		if src, _, _ := gofiles.In(p); len(src) > 0 {
			rel, _ := filepath.Rel(root, p)
			pkgs = append(pkgs, filepath.ToSlash(rel))
		}
		return nil
	})
	return pkgs
}

// explainNotCached words the error of each package whose module the go
// command could not look up, for GOPROXY=off, as the module version the
// module cache lacks. mods are the modules go.mod requires, the main
// module first, and versions their versions.
func (l *listing) explainNotCached(mods []string, versions map[string]string) {
	for path, lp := range l.pkgs {
		if lp.err == nil {
			continue
		}
		mod := gomod.ModuleOf(path, mods)
		if nc := gomod.NotCached(lp.err.Error(), mod, versions[mod]); nc != nil {
			lp.err = nc
		}
	}
}
