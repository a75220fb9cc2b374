// Package gen is kvgen's generator. It takes a manifest and its entries'
// packages as the go command listed them (package load), checks every
// constructor against the contract with go/types (Check), and renders the
// static registry file (Render). It writes nothing, and links nothing:
// package link, the stage before it, makes the go.mod the packages were
// listed with, and package pipeline runs both for the commands.
package gen

import (
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Entry is a manifest entry checked against its Go package: what the
// generated registry links, and what `kvgen list` shows.
type Entry struct {
	// Pos is where the entry is in the manifest.
	Pos token.Position
	// Name, Aliases and Roles are the manifest's values.
	Name    string
	Aliases []string
	Roles   []string
	// ImportPath and PkgName identify the constructor's package.
	ImportPath string
	PkgName    string
	// Constructor is the constructor's name, from the manifest or from
	// the package's //kvgen:constructor marker.
	Constructor string
	// Module and ModuleVersion describe the module that holds the package,
	// as the go command resolved it. The version reads as a built binary
	// reports it in its build information: "(devel)" for the main module,
	// the replacement's version for a module replaced by another version,
	// and "v0.1.0 => ../dir" for one replaced by a directory.
	Module        string
	ModuleVersion string
	// Adapt is set when the constructor returns another type than the
	// contract's own, one that implements it: the generated code wraps
	// the constructor in an adapter function of the contract's type.
	Adapt bool
	// Decl is where the constructor is declared.
	Decl token.Position
	// Manifest is the entry as the manifest writes it, with what kvgen
	// passes on from it unchanged.
	Manifest manifest.Entry
}

// markerConstructor marks the function a manifest entry without a
// constructor uses. It stands alone on a line of the function's doc comment.
const markerConstructor = "//kvgen:constructor"

// prepareEntry checks what one manifest entry needs before types: that
// its package loaded and can be imported, and which function is its
// constructor. It returns nil when the entry has a problem, which it adds
// to errs, and otherwise the entry and the position to blame for problems
// with the constructor.
func prepareEntry(errs *diag.List, c manifest.Entry, index int, lp *loadedPackage) (*Entry, token.Position) {
	label := c.Label(index)
	if lp.err != nil {
		*errs = append(*errs, packageProblem(c, label, lp.err))
		return nil, token.Position{}
	}
	p := lp.pkg
	e := &Entry{
		Pos:        c.Pos,
		Manifest:   c,
		Name:       c.Name.V,
		Roles:      c.RoleNames(),
		ImportPath: p.PkgPath,
		PkgName:    p.Name,
	}
	for _, a := range c.Aliases {
		e.Aliases = append(e.Aliases, a.V)
	}
	if p.Module != nil {
		e.Module, e.ModuleVersion = p.Module.Path, linkedVersion(p.Module)
	}
	if p.Name == "main" {
		errs.Add(c.Import.Pos, "%s: %s is a main package, which cannot be imported; move the connector into a library package", label, suggest.Quote(p.PkgPath))
		return nil, token.Position{}
	}

	name, namePos := c.Constructor.V, c.Constructor.Pos
	if name == "" {
		namePos = c.Pos
		files, err := lp.src.Holding(markerConstructor)
		marked := findMarked(files)
		switch {
		case err != nil:
			errs.Add(c.Pos, "%s: looking for a %s marker: %v", label, markerConstructor, err)
			return nil, token.Position{}
		case len(marked) == 0:
			errs.Add(c.Pos, "%s: no constructor given and package %s marks none; add `constructor: NAME` to the entry, or a %s line to the constructor's doc comment", label, suggest.Quote(p.PkgPath), markerConstructor)
			return nil, token.Position{}
		case len(marked) > 1:
			errs.Add(c.Pos, "%s: package %s marks %d constructors (%s); name one with `constructor:`", label, suggest.Quote(p.PkgPath), len(marked), strings.Join(marked, ", "))
			return nil, token.Position{}
		}
		name = marked[0]
	}
	e.Constructor = name
	return e, namePos
}

// packageProblem is the problem of an entry whose package did not load,
// at its import: key. A package that does not compile quotes the
// compiler's errors, each at its place in the package's files.
func packageProblem(c manifest.Entry, label string, err error) *diag.Error {
	var ce *load.CompileError
	if errors.As(err, &ce) {
		e := diag.Errorf(c.Import.Pos, "%s: package %s does not compile", label, suggest.Quote(c.Import.V))
		if i := slices.IndexFunc(ce.Pkgs, func(p string) bool { return p != c.Import.V }); i >= 0 && !slices.Contains(ce.Pkgs, c.Import.V) {
			e = diag.Errorf(c.Import.Pos, "%s: package %s does not build: it imports %s, which does not compile", label, suggest.Quote(c.Import.V), suggest.Quote(ce.Pkgs[i]))
		}
		e.Quoted = ce.Errs
		return e
	}
	return diag.Errorf(c.Import.Pos, "%s: package %s: %v", label, suggest.Quote(c.Import.V), err)
}

// checkTypes checks a prepared entry's constructor against the contract,
// using its package's decoded export data. It reports whether the
// constructor fits, and where it is declared, as export data says.
func checkTypes(errs *diag.List, e *Entry, index int, namePos token.Position, lp *loadedPackage, rel func(string) string) (bool, token.Position) {
	c, p, name := e.Manifest, lp.pkg, e.Constructor
	label := c.Label(index)
	if lp.err != nil {
		*errs = append(*errs, packageProblem(c, label, lp.err))
		return false, token.Position{}
	}
	obj := lp.types.Scope().Lookup(name)
	if obj == nil {
		msg := fmt.Sprintf("%s: package %s has no function %s", label, suggest.Quote(p.PkgPath), suggest.Quote(name))
		if near := suggest.Nearest(name, exported[*types.Func](lp.types), 3); len(near) > 0 {
			msg += "; did you mean " + quoteJoin(near) + "?"
		} else if fit := fitting(lp.types, lp.contract, e.Roles); len(fit) > 0 {
			// Not a typo: the name may be a guess, and these are what
			// it could have been.
			msg += "; its functions that fit the contract: " + strings.Join(fit, ", ")
		}
		errs.Add(namePos, "%s", msg)
		return false, token.Position{}
	}
	decl := lp.fset.Position(obj.Pos())
	e.Decl = position(decl, p.PkgPath, p.GoFiles, rel)
	fn, ok := obj.(*types.Func)
	if !ok {
		errs.Add(namePos, "%s: %s.%s is a %s, not a function (declared at %s); kvgen calls a function declared with func",
			label, p.Name, name, objectKind(obj), diag.At(e.Decl, "declared here"))
		return false, token.Position{}
	}
	if !fn.Exported() {
		errs.Add(namePos, "%s: %s.%s is not exported; the generated package cannot call it", label, p.Name, name)
		return false, token.Position{}
	}
	sig := fn.Type().(*types.Signature)
	if problem := checkSignature(sig, lp.contract, e); problem != "" {
		errs.Add(namePos, "%s: %s.%s (declared at %s) %s", label, p.Name, name, diag.At(e.Decl, "declared here"), problem)
		return false, token.Position{}
	}
	return true, decl
}

// checkSignature returns what is wrong with a constructor's signature in Go
// terms, or "" if it fits the contract; it sets e.Adapt.
func checkSignature(sig *types.Signature, c *typedContract, e *Entry) string {
	return c.check(sig, e)
}

// maxFitting bounds how many fitting functions a message names.
const maxFitting = 10

// fitting lists the exported functions of pkg that would pass the check
// as the constructor of an entry serving roles, the first maxFitting of
// them and then how many more there are.
func fitting(pkg *types.Package, c *typedContract, roles []string) []string {
	var fit []string
	for _, n := range exported[*types.Func](pkg) {
		sig := pkg.Scope().Lookup(n).Type().(*types.Signature)
		if checkSignature(sig, c, &Entry{Roles: roles}) == "" {
			fit = append(fit, n)
		}
	}
	if len(fit) > maxFitting {
		fit = append(fit[:maxFitting], fmt.Sprintf("and %d more", len(fit)-maxFitting))
	}
	return fit
}

// missing says which method keeps t from implementing iface.
func missing(t types.Type, iface *types.Interface, str func(types.Type) string) string {
	m, wrongType := types.MissingMethod(t, iface, true)
	switch {
	case m == nil:
		return ""
	case wrongType:
		return fmt.Sprintf(" (method %s has the wrong signature; want %s)", m.Name(), str(m.Type()))
	}
	return fmt.Sprintf(" (missing method %s)", m.Name())
}

// findMarked returns the functions whose doc comment holds the
// //kvgen:constructor marker. The package's files are parsed only for
// entries that leave out the constructor.
func findMarked(files []*ast.File) []string {
	var names []string
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Doc == nil || fd.Recv != nil {
				continue
			}
			for _, c := range fd.Doc.List {
				if strings.TrimSpace(c.Text) == markerConstructor {
					names = append(names, fd.Name.Name)
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// linkedVersion says which version of m a build links, in the words of
// the binary's build information, so that a listing before the build reads
// as the built binary's own.
func linkedVersion(m *packages.Module) string {
	switch r := m.Replace; {
	case m.Main:
		return "(devel)"
	case r == nil:
		return m.Version
	case r.Version != "":
		return r.Version
	default:
		return m.Version + " => " + r.Path
	}
}

// Summary returns the first sentence of the doc comment of the function
// constructor, or else of its package's documentation, from src, the
// package's files: what a listing shows of an entry. Directives such as
// the constructor marker are not part of it. It is "" when there is none,
// or the files cannot be parsed.
func Summary(src *load.SourceFiles, constructor string) string {
	// Every file: the package's doc, where the constructor has none, may
	// be in any of them.
	files, _ := src.Holding() // what does not parse has no doc to give
	return summary(files, constructor)
}

// summary is Summary of the package's files.
func summary(files []*ast.File, constructor string) string {
	pkgDoc := ""
	for _, f := range files {
		if pkgDoc == "" && f.Doc != nil {
			pkgDoc = firstSentence(f.Doc.Text())
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == constructor && fd.Doc != nil {
				if s := firstSentence(fd.Doc.Text()); s != "" {
					return s
				}
			}
		}
	}
	return pkgDoc
}

func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// exported lists the exported names of pkg that declare a T (a
// *types.Func, a *types.TypeName), for suggestions.
func exported[T types.Object](pkg *types.Package) []string {
	var names []string
	for _, n := range pkg.Scope().Names() {
		if _, ok := pkg.Scope().Lookup(n).(T); ok && token.IsExported(n) {
			names = append(names, n)
		}
	}
	return names
}

func objectKind(obj types.Object) string {
	switch obj.(type) {
	case *types.Var:
		return "variable"
	case *types.Const:
		return "constant"
	case *types.TypeName:
		return "type"
	case *types.Func:
		return "function"
	}
	return "declaration"
}

func quoteJoin(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, " or ")
}

// position shows p, a position in package pkgPath, whose Go files are
// files, as a file system path that an editor can open: relative to the
// working directory when rel makes it so (see diag.ShortPath).
func position(p token.Position, pkgPath string, files []string, rel func(string) string) token.Position {
	if p.Filename != "" && !filepath.IsAbs(p.Filename) {
		// Export data compiled with -trimpath names the file by its
		// module path; the package's file of that name is on disk.
		base := filepath.Base(p.Filename)
		if i := slices.IndexFunc(files, func(f string) bool { return filepath.Base(f) == base }); i >= 0 {
			p.Filename = files[i]
		} else {
			p.Filename = pkgPath + "/" + base // no file on disk to name
		}
	}
	if filepath.IsAbs(p.Filename) {
		p.Filename = rel(p.Filename)
	}
	// Export data keeps lines but not columns or offsets; keep neither
	// rather than wrong ones.
	p.Column, p.Offset = 0, 0
	return p
}

// Check checks every entry of m against its package as l lists it, and
// returns those that pass, in manifest order; the problems it finds are
// added to errs. outPath is the import path of the package the registry
// goes into, "" if unknown; rel shows a file's path as messages show it;
// memo, when not nil, remembers checks that passed. An entry whose check
// memo remembers needs no types, and the packages of the others are
// decoded together, in parallel. Without contractOK, the contract could
// not be read, and only what does not need it is checked.
func Check(errs *diag.List, m *manifest.Manifest, l *load.Listing, outPath string, contract *Contract, contractOK bool, rel func(string) string, memo Memo) ([]*Entry, error) {
	return checkEntries(errs, m, l, loadedPackages(l), outPath, contract, contractOK, rel, memo)
}

// checkEntries is Check with the packages of l as pkgs, by import path:
// tests make them up, with their types.
func checkEntries(errs *diag.List, m *manifest.Manifest, ld *load.Listing, pkgs map[string]*loadedPackage, outPath string, contract *Contract, contractOK bool, rel func(string) string, memo Memo) ([]*Entry, error) {
	if memo == nil {
		memo = noMemo{}
	}
	type miss struct {
		index   int
		e       *Entry
		namePos token.Position
		lp      *loadedPackage
		key     string
		link    bool
	}
	var misses []miss
	var todo []*loadedPackage
	// What every entry's check reads of the contract: a changed contract
	// is checked afresh.
	shared := CheckInput{
		RegistryExport: exportName(ld.RegistryPkg),
		ContractExport: exportName(ld.ContractPkg),
		Factory:        contract.String(),
		Roles:          contract.Roles,
		Registry:       contract.Registry,
	}
	entries := make([]*Entry, len(m.Entries))
	for i, c := range m.Entries {
		// A roles: problem does not stop the check: the constructor is
		// checked for the roles that are right, so that one run reports
		// every problem the entry has.
		rolesOK, roles := true, c.RoleNames()
		if contractOK {
			rolesOK, roles = checkRoles(errs, c, i, contract)
		}
		if c.Invalid && !c.OnlyNames {
			continue // its problems are reported already
		}
		// An entry with a problem is checked, but not linked.
		link := rolesOK && !c.Invalid
		if outPath != "" && c.Import.V == outPath {
			errs.Add(c.Import.Pos, "%s: %s is the package the registry is generated into, and a package cannot import itself; move the connector to its own package, or generate the registry elsewhere with output:", c.Label(i), c.Import.V)
			continue
		}
		lp := pkgs[c.Import.V]
		e, namePos := prepareEntry(errs, c, i, lp)
		if e == nil || !contractOK {
			continue
		}
		e.Roles = roles // without a roles: problem, the entry's own
		var key string
		if link {
			in := shared
			in.PackageExport, in.ImportPath, in.Constructor, in.EntryRoles = exportName(lp.pkg), e.ImportPath, e.Constructor, e.Roles
			key = memo.Key(in)
			if r, ok := memo.Get(key); ok {
				e.Adapt = r.Adapt
				e.Decl = position(token.Position{Filename: r.DeclFile, Line: r.DeclLine}, e.ImportPath, lp.pkg.GoFiles, rel)
				entries[i] = e
				continue
			}
		}
		if lp.types == nil && !slices.Contains(todo, lp) {
			todo = append(todo, lp)
		}
		misses = append(misses, miss{i, e, namePos, lp, key, link})
	}
	if len(todo) > 0 {
		if err := decode(todo, ld.ContractPkg, contract); err != nil {
			return nil, err
		}
	}
	for _, ms := range misses {
		if ok, decl := checkTypes(errs, ms.e, ms.index, ms.namePos, ms.lp, rel); ok && ms.link {
			entries[ms.index] = ms.e
			memo.Put(ms.key, Checked{Adapt: ms.e.Adapt, DeclFile: decl.Filename, DeclLine: decl.Line})
		}
	}
	return slices.DeleteFunc(entries, func(e *Entry) bool { return e == nil }), nil
}

// loadedPackages are the packages of l, by import path, for checkEntries
// to decode those it needs.
func loadedPackages(l *load.Listing) map[string]*loadedPackage {
	pkgs := make(map[string]*loadedPackage, len(l.Packages))
	for path, p := range l.Packages {
		pkgs[path] = &loadedPackage{pkg: p.Pkg, err: p.Err, src: p.Src}
	}
	return pkgs
}

// exportName is the name of p's export file in the go command's build
// cache, the hash of its content; "" when p is nil or has none.
func exportName(p *packages.Package) string {
	if p == nil || p.ExportFile == "" {
		return ""
	}
	return filepath.Base(p.ExportFile)
}

// checkRoles checks that the roles entry c lists are roles the contract
// declares, and reports those that are not at their positions. It returns
// whether all are, and the roles to check the constructor for: those of
// c's roles the contract declares, nil (every role) if c lists none or the
// contract declares none.
func checkRoles(errs *diag.List, c manifest.Entry, index int, contract *Contract) (bool, []string) {
	if len(c.Roles) == 0 {
		return true, c.RoleNames()
	}
	declared := contract.RoleNames()
	if len(declared) == 0 {
		errs.Add(c.Roles[0].Pos, "%s: roles: the contract %s declares no roles (with a %s line), so remove roles:", c.Label(index), contract.String(), MarkerRoles)
		return false, nil
	}
	ok, known := true, []string{}
	for _, r := range c.Roles {
		if slices.Contains(declared, r.V) {
			known = append(known, r.V)
			continue
		}
		msg := fmt.Sprintf("%s: unknown role %s", c.Label(index), suggest.Quote(r.V))
		if near := suggest.Nearest(r.V, declared, 1); len(near) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", near[0])
		} else {
			msg += fmt.Sprintf("; the contract %s declares %s", contract.String(), quoteJoin(declared))
		}
		errs.Add(r.Pos, "%s", msg)
		ok = false
	}
	return ok, known
}
