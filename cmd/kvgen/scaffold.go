package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/atomicfile"
	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/link"
	"github.com/kvgen/kvgen/internal/suggest"
	"github.com/kvgen/kvgen/internal/templates"
)

// runNew is kvgen new: it scaffolds a KV connector module, or with
// -factory a plugin of that contract: a package in this module, or with
// -module a module of its own.
func runNew(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "new", "NAME [-module PATH] [-dir DIR] [-replace DIR] | NAME -factory IMPORT/PATH.TypeName [-module PATH] [-dir DIR]")
	modPath := fs.String("module", "", "module path of the new connector (default example.com/NAME), or with -factory of the new plugin module")
	factory := fs.String("factory", "", "scaffold a plugin of this contract (IMPORT/PATH.TypeName, as a manifest's factory: value): a package in this module, or with -module a module")
	dir := fs.String("dir", "", "directory to create (default ./NAME)")
	replace := fs.String("replace", "", "local kvgen checkout to develop against (adds a replace directive, relative to the new module; a development build of kvgen adds the one of this module's go.mod)")
	// Flags may follow the name: kvgen new acme -module example.com/acme.
	positional, code := parseMixed(e, fs, args)
	if code >= 0 {
		return code
	}
	if len(positional) != 1 {
		return usageErrorf(e, fs, "new: want one NAME, got %d: %q", len(positional), positional)
	}
	name := positional[0]
	if err := templates.CheckName(name); err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if *factory != "" && *replace != "" {
		e.errorf("new: -replace names a kvgen checkout for a KV connector module; with -factory, new scaffolds a plugin of that contract, and with -module its go.mod replaces what this module's does")
		return exitUsage
	}
	if *factory == "" && *modPath == "" {
		*modPath = "example.com/" + name
	}
	if *modPath != "" {
		if err := module.CheckPath(*modPath); err != nil {
			e.errorf("-module: %v", err)
			return exitUsage
		}
	}
	if *dir == "" {
		*dir = name
	}
	// What is checked to exist is what is written: "link/../x" is "x".
	*dir = filepath.Clean(*dir)
	if *factory != "" {
		return newPlugin(ctx, e, name, *factory, *dir, *modPath)
	}
	if _, err := os.Stat(*dir); err == nil {
		e.errorf("%s already exists; choose another -dir", suggest.Show(*dir))
		return exitError
	}
	s := templates.ConnectorScaffold{Name: name, Module: *modPath, GoVersion: scaffoldGoVersion, KVGenVersion: cmp.Or(ownVersion(), devVersion)}
	var fromHost bool
	var err error
	if s.Replace, fromHost, err = scaffoldReplace(ctx, *replace, *dir); err != nil {
		e.report(err)
		return exitError
	}
	files, err := templates.RenderConnectorScaffold(s)
	if err != nil {
		e.report(err)
		return exitError
	}
	names, err := writeScaffold(*dir, files)
	if err != nil {
		e.report(err)
		return exitError
	}
	fmt.Fprintf(e.stdout, "created %s (module %s): %s\n", suggest.Show(*dir), *modPath, strings.Join(names, ", "))
	if fromHost && s.Replace != "" {
		fmt.Fprintf(e.stdout, "go.mod replaces %s by %s, the checkout this module's go.mod replaces it by\n", kvgenModule, suggest.Show(s.Replace))
	}
	if s.Replace == "" && strings.HasPrefix(s.KVGenVersion, "v0.0.0-") {
		fmt.Fprintf(e.stdout, "this kvgen is a development build: point go.mod at your kvgen checkout with\n\tgo mod edit -replace github.com/kvgen/kvgen=PATH\n")
	}
	workspaceNote(e, *dir)
	fmt.Fprintf(e.stdout, "next: cd %s && go mod tidy && go test ./...\n", suggest.Show(*dir))
	return exitOK
}

// scaffoldGoVersion is the go line of a scaffolded module: kvgen's own.
const scaffoldGoVersion = "1.26.0"

// devVersion is the version a scaffolded module requires of a module no
// proxy serves, which its go.mod replaces by a directory: the go
// command's placeholder for a version that does not matter.
const devVersion = "v0.0.0-00010101000000-000000000000"

// scaffoldReplace returns the replace target of kvgen for a module
// scaffolded in dir, relative to it as kvgen writes replace lines (no
// machine path in go.mod), or "" for none: the checkout -replace names,
// else, for a development build, the one the host module's go.mod
// replaces kvgen by (fromHost), so that the new module builds against the
// kvgen that made it.
func scaffoldReplace(ctx context.Context, replace, dir string) (target string, fromHost bool, err error) {
	checkout := replace
	if checkout == "" && ownVersion() == "" {
		// A development build: no proxy has its version, but the host
		// module's go.mod, which it runs from, names its checkout.
		if main, err := link.FindMain(ctx, workDir(), os.Environ()); err == nil {
			checkout, fromHost = main.ReplaceDir(kvgenModule), true
		}
	}
	if checkout == "" {
		return "", fromHost, nil
	}
	abs, err := filepath.Abs(checkout)
	if err != nil {
		return "", fromHost, err
	}
	newDir, err := filepath.Abs(dir)
	if err != nil {
		return "", fromHost, err
	}
	target, err = link.ReplaceTarget(newDir, abs)
	return target, fromHost, err
}

// writeScaffold writes files, by name, in dir, which it creates, and
// returns their names sorted, for the line that says what was created;
// each file is written whole or not at all, so a failure leaves no torn
// one behind.
func writeScaffold(dir string, files map[string][]byte) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(files))
	for _, n := range names {
		if err := atomicfile.Write(filepath.Join(dir, n), files[n]); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// newPlugin scaffolds, in dir, a package holding a constructor of the
// contract factory names and a test of it; with modPath, as the root
// package of a module of that path, whose go.mod requires the contract's
// module.
func newPlugin(ctx context.Context, e *env, name, factory, dir, modPath string) int {
	if _, err := os.Stat(dir); err == nil {
		e.errorf("%s already exists; choose another -dir", suggest.Show(dir))
		return exitError
	}
	c, err := gen.LoadContract(ctx, workDir(), os.Environ(), factory)
	if err != nil {
		e.report(err)
		return exitError
	}
	sig := signatureOf(c.Type())
	if sig.imports[c.Path] == name || slices.Contains(slices.Collect(maps.Values(sig.imports)), name) {
		e.errorf("plugin name %q: the contract's signature names a package of that name; choose another", name)
		return exitUsage
	}
	p := templates.PluginScaffold{
		Name: name, Contract: c.String(), TypeName: c.PkgName + "." + c.Name,
		Params: sig.paramList, Results: sig.resultList, ReturnsError: sig.returnsError,
		Imports: []templates.Import{{Path: c.Path, Name: c.PkgName}},
	}
	if c.Interface {
		p.TypeName = "func() " + p.TypeName
		// A value that works: a host may call its methods.
		p.Impl = name
		for _, m := range methodsOf(c.Type(), sig.imports) {
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
	for _, path := range slices.Sorted(maps.Keys(sig.imports)) {
		if path != c.Path {
			p.Imports = append(p.Imports, templates.Import{Path: path, Name: sig.imports[path]})
		}
	}
	results := slices.Clone(sig.results)
	if sig.returnsError {
		results[len(results)-1] = fmt.Sprintf("errors.New(%q)", name+": not implemented")
		p.ReturnsError = true
	}
	p.Return = strings.Join(results, ", ")
	p.Call = "New(" + strings.Join(sig.params, ", ") + ")"
	if n := len(sig.results); n > 0 {
		p.Call = strings.Repeat("_, ", n-1) + "_ = " + p.Call
	}
	if c.Interface {
		p.Return = "&" + p.Impl + "{}"
		p.Call = "if New() == nil {\n\t\tt.Fatal(\"New returns nil\")\n\t}"
	}
	files, err := templates.RenderPluginScaffold(p)
	if err == nil && modPath != "" {
		files["go.mod"], err = hostPluginGoMod(ctx, modPath, c.Module(), dir)
	}
	if err != nil {
		e.report(err)
		return exitError
	}
	names, err := writeScaffold(dir, files)
	if err != nil {
		e.report(err)
		return exitError
	}
	pluginCreated(e, dir, modPath, c.String(), names)
	return exitOK
}

// pluginCreated says what newPlugin wrote, and what to do next.
func pluginCreated(e *env, dir, modPath, contract string, names []string) {
	if modPath == "" {
		fmt.Fprintf(e.stdout, "created %s, a plugin of %s: %s\n", suggest.Show(dir), contract, strings.Join(names, ", "))
		fmt.Fprintf(e.stdout, "next: go test %s, then list its import path in the manifest (New is marked, so no constructor: line) and run go generate\n", suggest.Show(goPackageArg(dir)))
		return
	}
	fmt.Fprintf(e.stdout, "created %s (module %s), a plugin of %s: %s\n", suggest.Show(dir), modPath, contract, strings.Join(names, ", "))
	workspaceNote(e, dir)
	fmt.Fprintf(e.stdout, "next: cd %s && go mod tidy && go test ./..., then list it in the host's manifest (import: %s, with replace: or version:; New is marked, so no constructor: line) and run go generate\n", suggest.Show(dir), modPath)
}

// workspaceNote says that a module new made in dir is not in the
// workspace the go command would use there, and how to put it in: without
// it, the go commands of the next step fail.
func workspaceNote(e *env, dir string) {
	if work := gocmd.WorkFile(workDir(), os.Environ()); work != "" && inWorkspace(work, dir) {
		fmt.Fprintf(e.stdout, "the workspace %s does not use it: go work use %s, or run what follows with GOWORK=off\n", suggest.Show(work), suggest.Show(dir))
	}
}

// inWorkspace reports whether the go command run in dir uses the
// workspace work: GOWORK names it, or dir is below its directory, where
// the go command finds it.
func inWorkspace(work, dir string) bool {
	if gocmd.Lookup(os.Environ(), "GOWORK") != "" {
		return true
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(filepath.Dir(work), abs)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// hostPluginGoMod is pluginGoMod for a plugin of this module's build: the
// go.mod of the module kvgen runs in is the host's.
func hostPluginGoMod(ctx context.Context, modPath string, contract *packages.Module, dir string) ([]byte, error) {
	host, err := link.FindMain(ctx, workDir(), os.Environ())
	if errors.Is(err, link.ErrNoModule) {
		host, err = nil, nil // a contract of the standard library's, outside any module
	}
	if err != nil {
		return nil, err
	}
	return pluginGoMod(modPath, contract, host, dir)
}

// pluginGoMod is the go.mod of a plugin module of path modPath in dir, in
// a build of host (nil for none): it requires the contract's module,
// contract, at the version host builds with, and replaces what host's
// go.mod replaces, so that it builds as host does, the contract's
// dependencies included. A contract of a main module, host's own or a
// workspace's, which no proxy serves, is replaced by its directory.
// Directories are relative, so that no machine path lands in go.mod, and,
// as the go command reads them, from dir as given, symbolic links and all.
func pluginGoMod(modPath string, contract *packages.Module, host *link.Main, dir string) ([]byte, error) {
	f := new(modfile.File)
	if err := f.AddModuleStmt(modPath); err != nil {
		return nil, err
	}
	if err := f.AddGoStmt(scaffoldGoVersion); err != nil {
		return nil, err
	}
	var replaces []module.Version // old, new, old, new...
	if host != nil {
		replaces = host.Replaces()
	}
	if contract != nil {
		if contract.Path == modPath || host != nil && host.Path == modPath {
			return nil, fmt.Errorf("-module %s is the path of the contract's module or of this one; give the plugin module its own", modPath)
		}
		version := contract.Version
		if contract.Main {
			if contract.Dir == "" {
				return nil, fmt.Errorf("the go command names no directory of the contract's module %s", contract.Path)
			}
			version = devVersion
			replaces = append(replaces, module.Version{Path: contract.Path}, module.Version{Path: contract.Dir})
		}
		f.AddNewRequire(contract.Path, version, false)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(replaces); i += 2 {
		from, to := replaces[i], replaces[i+1]
		if from.Path == modPath {
			continue // the plugin module is its own
		}
		if to.Version == "" {
			if to.Path, err = link.ReplaceTarget(abs, to.Path); err != nil {
				return nil, err
			}
		}
		if err := f.AddReplace(from.Path, from.Version, to.Path, to.Version); err != nil {
			return nil, err
		}
	}
	return modfile.Format(f.Syntax), nil
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

// signature is a constructor of a contract as a scaffold writes it.
type signature struct {
	// imports are the packages the lists and zero values name, by import
	// path, with the names they call them by.
	imports map[string]string
	// params and results are the zero values of the parameters and
	// results, as Go expressions: what a stub returns, and what a test of
	// it passes.
	params, results []string
	// paramList and resultList are the parameter and result lists as Go
	// source writes them, such as "(next http.Handler, cfg
	// json.RawMessage)" and "(http.Handler, error)".
	paramList, resultList string
	// returnsError is set when the last result is an error.
	returnsError bool
}

// signatureOf is the signature of a constructor of the contract type t:
// the function type's own, or a function of no arguments returning the
// interface.
func signatureOf(t types.Type) signature {
	s := signature{imports: map[string]string{}}
	named := func(p *types.Package) string {
		s.imports[p.Path()] = p.Name()
		return p.Name()
	}
	zeros := func(tuple *types.Tuple) []string {
		var z []string
		for v := range tuple.Variables() {
			z = append(z, zero(v.Type(), named))
		}
		return z
	}
	u, ok := t.Underlying().(*types.Signature)
	if !ok {
		s.results = []string{"nil"}
		s.paramList, s.resultList = "()", types.TypeString(t, named)
		return s
	}
	s.params, s.results = zeros(u.Params()), zeros(u.Results())
	if u.Variadic() {
		s.params = s.params[:len(s.params)-1] // a call passes none
	}
	// A tuple prints no "...": the parameters print as a signature's.
	var params bytes.Buffer
	types.WriteSignature(&params, types.NewSignatureType(nil, nil, nil, u.Params(), nil, u.Variadic()), named)
	s.paramList, s.resultList = params.String(), types.TypeString(u.Results(), named)
	if n := u.Results().Len(); n > 0 {
		s.returnsError = types.Identical(u.Results().At(n-1).Type(), types.Universe.Lookup("error").Type())
	}
	return s
}

// zero is the zero value of t as a Go expression, its packages named by
// qual.
func zero(t types.Type, qual types.Qualifier) string {
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Info()&types.IsBoolean != 0:
			return "false"
		case u.Info()&types.IsString != 0:
			return `""`
		case u.Info()&types.IsNumeric != 0:
			return "0"
		}
	case *types.Struct, *types.Array:
		return types.TypeString(t, qual) + "{}"
	}
	return "nil"
}

// method is a method of an interface contract, as a stub declares it.
type method struct {
	// Name is the method's name; an unexported one cannot be declared
	// outside the contract's package.
	Name string
	// Signature is its parameters and results as a method declaration
	// writes them after the name, types qualified by package name, such as
	// "(key string) ([]byte, error)".
	Signature string
	// Results are the zero values of its results, as Go expressions.
	Results []string
	// ReturnsError is set when its last result is an error.
	ReturnsError bool
}

// methodsOf lists the methods of the interface t, embedded ones included,
// in the order go/types lists them: what a type that implements it
// declares. The packages they name are added to imports.
func methodsOf(t types.Type, imports map[string]string) []method {
	u, ok := t.Underlying().(*types.Interface)
	if !ok {
		return nil
	}
	named := func(p *types.Package) string {
		imports[p.Path()] = p.Name()
		return p.Name()
	}
	var ms []method
	for m := range u.Methods() {
		sig := m.Signature()
		var b bytes.Buffer
		types.WriteSignature(&b, sig, named)
		var zeros []string
		for v := range sig.Results().Variables() {
			zeros = append(zeros, zero(v.Type(), named))
		}
		n := sig.Results().Len()
		ms = append(ms, method{Name: m.Name(), Signature: b.String(), Results: zeros,
			ReturnsError: n > 0 && types.Identical(sig.Results().At(n-1).Type(), types.Universe.Lookup("error").Type())})
	}
	return ms
}
