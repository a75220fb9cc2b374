package main

import (
	"cmp"
	"context"
	"fmt"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/module"

	"github.com/kvgen/kvgen/gen"
	"github.com/kvgen/kvgen/internal/atomicfile"
	"github.com/kvgen/kvgen/internal/gomod"
	"github.com/kvgen/kvgen/internal/suggest"
	"github.com/kvgen/kvgen/templates"
)

func runNew(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "new", "NAME [-module PATH] [-dir DIR] [-replace DIR] | NAME -factory IMPORT/PATH.TypeName [-dir DIR]")
	modPath := fs.String("module", "", "module path of the new connector (default example.com/NAME)")
	factory := fs.String("factory", "", "scaffold a plugin package of this contract, as a manifest's factory: names it, in this module")
	dir := fs.String("dir", "", "directory to create (default ./NAME)")
	replace := fs.String("replace", "", "local kvgen checkout to develop against (adds a replace directive, relative to the new module; a development build of kvgen adds the one of this module's go.mod)")
	// Flags may follow the name: kvgen new acme -module example.com/acme.
	positional, code := parseMixed(fs, args)
	if code >= 0 {
		return code
	}
	if len(positional) != 1 {
		e.errorf("new: want one NAME, got %d: %q", len(positional), positional)
		fs.Usage()
		return exitUsage
	}
	name := positional[0]
	if err := templates.CheckName(name); err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if *factory != "" {
		if *modPath != "" || *replace != "" {
			e.errorf("new: -factory scaffolds a package in this module; -module and -replace make a KV connector module")
			return exitUsage
		}
		if *dir == "" {
			*dir = name
		}
		return newPlugin(ctx, e, name, *factory, *dir)
	}
	if *modPath == "" {
		*modPath = "example.com/" + name
	}
	if err := module.CheckPath(*modPath); err != nil {
		e.errorf("-module: %v", err)
		return exitUsage
	}
	if *dir == "" {
		*dir = name
	}
	if _, err := os.Stat(*dir); err == nil {
		e.errorf("%s already exists; choose another -dir", suggest.Show(*dir))
		return exitError
	}
	s := templates.Scaffold{Name: name, Module: *modPath, GoVersion: "1.26.0", KVGenVersion: cmp.Or(ownVersion(), "v0.0.0-00010101000000-000000000000")}
	checkout, fromHost := *replace, false
	if checkout == "" && ownVersion() == "" {
		// A development build: no proxy has its version, but the host
		// module's go.mod, which it runs from, names its checkout.
		if main, err := gomod.FindMain(ctx, workDir(), os.Environ()); err == nil {
			checkout, fromHost = main.ReplaceDir(kvgenModule), true
		}
	}
	if checkout != "" {
		abs, err := filepath.Abs(checkout)
		if err == nil {
			var newDir string
			if newDir, err = filepath.Abs(*dir); err == nil {
				// Relative, as kvgen writes replace lines: no machine path
				// in go.mod.
				s.Replace, err = gomod.ReplaceTarget(newDir, abs)
			}
		}
		if err != nil {
			e.report(err)
			return exitError
		}
	}
	files, err := templates.RenderScaffold(s)
	if err != nil {
		e.report(err)
		return exitError
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		e.report(err)
		return exitError
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := atomicfile.Write(filepath.Join(*dir, n), files[n]); err != nil {
			e.report(err)
			return exitError
		}
	}
	fmt.Fprintf(e.stdout, "created %s (module %s): %s\n", suggest.Show(*dir), *modPath, strings.Join(names, ", "))
	if fromHost && s.Replace != "" {
		fmt.Fprintf(e.stdout, "go.mod replaces %s by %s, the checkout this module's go.mod replaces it by\n", kvgenModule, suggest.Show(s.Replace))
	}
	if s.Replace == "" && strings.HasPrefix(s.KVGenVersion, "v0.0.0-") {
		fmt.Fprintf(e.stdout, "this kvgen is a development build: point go.mod at your kvgen checkout with\n\tgo mod edit -replace github.com/kvgen/kvgen=PATH\n")
	}
	fmt.Fprintf(e.stdout, "next: cd %s && go mod tidy && go test ./...\n", suggest.Show(*dir))
	return exitOK
}

// newPlugin scaffolds, in dir, a package holding a constructor of the
// contract factory names and a test of it.
func newPlugin(ctx context.Context, e *env, name, factory, dir string) int {
	if _, err := os.Stat(dir); err == nil {
		e.errorf("%s already exists; choose another -dir", suggest.Show(dir))
		return exitError
	}
	c, err := gen.LoadContract(ctx, workDir(), os.Environ(), factory)
	if err != nil {
		e.report(err)
		return exitError
	}
	if c.Imports[c.Path] == name || slices.Contains(slices.Collect(maps.Values(c.Imports)), name) {
		e.errorf("plugin name %q: the contract's signature names a package of that name; choose another", name)
		return exitUsage
	}
	p := templates.Plugin{
		Name: name, Contract: c.String(), TypeName: c.PkgName + "." + c.Name,
		Params: c.ParamList, Results: c.ResultList, ReturnsError: c.ReturnsError,
		Imports: []templates.Import{{Path: c.Path, Name: c.PkgName}},
	}
	if c.Interface {
		p.TypeName = "func() " + p.TypeName
		// A value that works: a host may call its methods.
		p.Impl = name
		for _, m := range c.Methods {
			if !token.IsExported(m.Name) {
				p.Embed = c.PkgName + "." + c.Name
				continue
			}
			results := slices.Clone(m.Results)
			if m.ReturnsError {
				results[len(results)-1] = fmt.Sprintf("errors.New(%q)", name+": "+m.Name+" is not implemented")
				p.ReturnsError = true
			}
			p.Methods = append(p.Methods, templates.Method{Name: m.Name, Signature: m.Signature, Return: strings.Join(results, ", ")})
		}
	}
	for _, path := range slices.Sorted(maps.Keys(c.Imports)) {
		if path != c.Path {
			p.Imports = append(p.Imports, templates.Import{Path: path, Name: c.Imports[path]})
		}
	}
	results := slices.Clone(c.Results)
	if c.ReturnsError {
		results[len(results)-1] = fmt.Sprintf("errors.New(%q)", name+": not implemented")
		p.ReturnsError = true
	}
	p.Return = strings.Join(results, ", ")
	p.Call = "New(" + strings.Join(c.Params, ", ") + ")"
	if n := len(c.Results); n > 0 {
		p.Call = strings.Repeat("_, ", n-1) + "_ = " + p.Call
	}
	if c.Interface {
		p.Return = "&" + p.Impl + "{}"
		p.Call = "if New() == nil {\n\t\tt.Fatal(\"New returns nil\")\n\t}"
	}
	files, err := templates.RenderPlugin(p)
	if err != nil {
		e.report(err)
		return exitError
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.report(err)
		return exitError
	}
	names := slices.Sorted(maps.Keys(files))
	for _, n := range names {
		if err := atomicfile.Write(filepath.Join(dir, n), files[n]); err != nil {
			e.report(err)
			return exitError
		}
	}
	fmt.Fprintf(e.stdout, "created %s, a plugin of %s: %s\n", suggest.Show(dir), c.String(), strings.Join(names, ", "))
	fmt.Fprintf(e.stdout, "next: go test %s, then list its import path in the manifest (New is marked, so no constructor: line) and run go generate\n", suggest.Show(goPackageArg(dir)))
	return exitOK
}

// goPackageArg is how the go command names the package in dir: a clean
// path, "./" in front only where the path would otherwise read as an
// import path.
func goPackageArg(dir string) string {
	p := filepath.ToSlash(filepath.Clean(dir))
	if filepath.IsAbs(dir) || p == "." || p == ".." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") {
		return p
	}
	return "./" + p
}
