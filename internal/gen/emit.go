package gen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/dave/jennifer/jen"

	"github.com/kvgen/kvgen/internal/inspect"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/manifest"
)

// RenderInput is everything Render renders the registry file from, and
// a cache's key of the file is its hash: what Render comes to read must
// be a field here, and is then in the key, as
// TestRenderKeyHoldsEveryField checks field by field.
type RenderInput struct {
	// Manifest is the manifest's path as the file names it.
	Manifest string
	// Package is the file's package name.
	Package string
	// Contract is what the file needs of the contract.
	Contract renderContract
	// Desc is the description of the manifest that the file embeds
	// (describe).
	Desc string
	// Entries are the checked entries, in manifest order.
	Entries []renderEntry
	// Declared are the top-level names the package's other files declare.
	Declared map[string]bool
}

// renderContract is what the registry file needs of the contract: the
// fields of Contract of those names.
type renderContract struct {
	Path, Name, PkgName string
	Interface           bool
	Registry            string
	Imports             map[string]string
	Adapter             adapterSig
}

// renderEntry is what the registry file needs of an entry: the fields of
// Entry of those names.
type renderEntry struct {
	Name, ImportPath, PkgName, Constructor, Module string
	Aliases, Roles                                 []string
	Adapt                                          bool
	// Description is the manifest's description: of the entry.
	Description string
}

// NewRenderInput is what Render reads of the registry file's inputs: the
// manifest m, named in the file as shownManifest, its checked entries and
// their contract, the file's package, its import path (importPath, "" if
// unknown) and the names the package's other files declare.
func NewRenderInput(m *manifest.Manifest, shownManifest, pkgName, importPath string, c *Contract, entries []*Entry, declared map[string]bool) (RenderInput, error) {
	desc, err := describe(m, c, importPath, entries)
	if err != nil {
		return RenderInput{}, err
	}
	return newRenderInput(shownManifest, pkgName, c, desc, entries, declared), nil
}

// newRenderInput is NewRenderInput with the description made.
func newRenderInput(manifestFile, pkgName string, c *Contract, desc string, entries []*Entry, declared map[string]bool) RenderInput {
	in := RenderInput{
		Manifest: manifestFile,
		Package:  pkgName,
		Contract: renderContract{Path: c.Path, Name: c.Name, PkgName: c.PkgName, Interface: c.Interface,
			Registry: c.Registry, Imports: c.imports, Adapter: c.adapter},
		Desc:     desc,
		Entries:  make([]renderEntry, len(entries)),
		Declared: declared,
	}
	for i, e := range entries {
		in.Entries[i] = renderEntry{Name: e.Name, ImportPath: e.ImportPath, PkgName: e.PkgName, Constructor: e.Constructor,
			Module: e.Module, Aliases: e.Aliases, Roles: e.Roles, Adapt: e.Adapt, Description: e.Manifest.Description.V}
	}
	return in
}

// describe is the description of the manifest and its checked entries that
// the registry file embeds, for kvgen inspect to read from a binary. It
// names the manifest by its file name alone, so that where kvgen ran from
// does not change the binary.
func describe(m *manifest.Manifest, contract *Contract, importPath string, entries []*Entry) (string, error) {
	d := inspect.Description{
		Manifest:       filepath.Base(m.File),
		ManifestSHA256: m.SHA256,
		Package:        importPath,
		Entries:        make([]inspect.Entry, len(entries)),
	}
	if c := contract.String(); c != DefaultFactory {
		d.Factory = c
	}
	for i, e := range entries {
		c := inspect.Entry{Name: e.Name, Aliases: e.Aliases, Import: e.ImportPath, Constructor: e.Constructor, Module: e.Module,
			Description: e.Manifest.Description.V}
		c.Roles = contract.RolesOf(e)
		d.Entries[i] = c
	}
	return inspect.Encode(d)
}

// Render renders the registry file. Every manifest string reaches the file
// through jen.Lit, so no value can change the code around it.
//
// The entries are a package-level slice of composite literals holding only
// constants and functions, which the compiler lays out as static data; a
// constructor whose result is a concrete type gets an adapter, a function
// literal that captures nothing, in its entry. No function grows with the number of entries: the
// compiler's passes over one function's code cost more than linear time in
// its size, and a registry of 10,000 entries built in one call expression
// took minutes and gigabytes to compile.
//
// The registry is a registry.Table of the contract's factory type, which
// the contract's registry function (//kvgen:registry) turns into the
// registry a host uses, if it names one.
func Render(in RenderInput) ([]byte, error) {
	c, entries := in.Contract, in.Entries
	f := jen.NewFile(in.Package)
	name := commentName(in.Manifest)
	f.HeaderComment(header(name))

	adapt := slices.ContainsFunc(entries, func(e renderEntry) bool { return e.Adapt })
	imports := importNames(c, entries, in.Declared, adapt)
	for _, imp := range imports {
		if imp.alias {
			f.ImportAlias(imp.path, imp.name)
		} else {
			f.ImportName(imp.path, imp.name)
		}
	}

	reg := func(name string) *jen.Statement { return jen.Qual(load.RegistryPath, name) }
	names := newIdents(in.Declared, imports)
	list := names.free("entries")
	descName := names.free("manifestDescription")
	items := make([]jen.Code, 0, len(entries)+1)
	for _, e := range entries {
		items = append(items, jen.Line().Values(entryFields(e, c)...))
	}
	items = append(items, jen.Line())

	entry := reg("Plugin").Types(factoryType(c))
	table := reg("MustNewTable").Call(jen.Id(descName), jen.Id(list).Op("..."))
	value := table
	f.Comment(fmt.Sprintf("Registry holds the plugins that %s lists, in its order,", name))
	if c.Registry != "" {
		value = jen.Qual(c.Path, c.Registry).Call(table)
		f.Comment(fmt.Sprintf("as the registry %s.%s makes of their table.", c.PkgName, c.Registry))
	} else {
		f.Comment(fmt.Sprintf("by name: Registry.Lookup(name) returns one's constructor, a %s.", c.typeName()))
	}
	f.Var().Id("Registry").Op("=").Add(value)
	f.Line()
	f.Comment(descName + " describes " + name + " and its plugins, for kvgen inspect to read from a binary.")
	f.Const().Id(descName).Op("=").Lit(in.Desc)
	f.Line()
	f.Comment(list + " is static data: constants and functions only.")
	f.Var().Id(list).Op("=").Index().Add(entry).Values(items...)

	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, fmt.Errorf("rendering the registry: %w", err)
	}
	out, err := groupImports(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting the registry: %w", err)
	}
	return out, nil
}

// entryFields are the fields of one entry's registry.Plugin literal, each
// on a line of its own; fields without a value are left out, so that a
// registry file reads as it did before they were added.
func entryFields(e renderEntry, c renderContract) []jen.Code {
	field := func(name string, value jen.Code) jen.Code {
		return jen.Line().Id(name).Op(":").Add(value)
	}
	fields := []jen.Code{field("Name", jen.Lit(e.Name))}
	if len(e.Aliases) > 0 {
		lits := make([]jen.Code, len(e.Aliases))
		for i, a := range e.Aliases {
			lits[i] = jen.Lit(a)
		}
		fields = append(fields, field("Aliases", jen.Index().String().Values(lits...)))
	}
	fields = append(fields,
		field("ImportPath", jen.Lit(e.ImportPath)),
		field("Constructor", jen.Lit(e.Constructor)))
	if e.Description != "" {
		fields = append(fields, field("Description", jen.Lit(e.Description)))
	}
	if e.Module != "" {
		fields = append(fields, field("Module", jen.Lit(e.Module)))
	}
	var factory jen.Code = jen.Qual(e.ImportPath, e.Constructor)
	if e.Adapt {
		factory = adapterLit(e, c.Adapter)
	}
	if e.Roles != nil {
		fields = append(fields, field("Roles", rolesLit(e.Roles)))
	}
	fields = append(fields, field("Factory", factory), jen.Line())
	return fields
}

// groupImports puts the standard library's imports of src, a gofmt'd
// file whose imports jennifer wrote as one sorted block, in a group of
// their own ahead of the others, as goimports leaves a file that a person
// wrote. Only the import block changes, so the file stays gofmt'd without
// being formatted a second time, which at 10,000 entries took a third of
// the time rendering did.
func groupImports(src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var block *ast.GenDecl
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT && g.Lparen.IsValid() {
			block = g
		}
	}
	if block == nil {
		return src, nil
	}
	offset := func(p token.Pos) int { return fset.Position(p).Offset }
	var std, other []byte
	for _, spec := range block.Specs {
		is := spec.(*ast.ImportSpec)
		path, err := strconv.Unquote(is.Path.Value)
		if err != nil {
			return nil, err
		}
		line := append([]byte("\t"), src[offset(is.Pos()):offset(is.End())]...)
		line = append(line, '\n')
		if load.Std(path) {
			std = append(std, line...)
		} else {
			other = append(other, line...)
		}
	}
	if len(std) == 0 || len(other) == 0 {
		return src, nil
	}
	out := make([]byte, 0, len(src)+1)
	out = append(out, src[:offset(block.Lparen)+1]...)
	out = append(out, '\n')
	out = append(out, std...)
	out = append(out, '\n')
	out = append(out, other...)
	return append(out, src[offset(block.Rparen):]...), nil
}

// factoryType is the type of a table's factories: the named function
// type, or a function that returns the interface.
func factoryType(c renderContract) jen.Code {
	if c.Interface {
		return jen.Func().Params().Qual(c.Path, c.Name)
	}
	return jen.Qual(c.Path, c.Name)
}

// idents hands out top-level names for the generated file that no other
// file of the package declares, that no import of the file is named, and
// that are not handed out twice.
type idents map[string]bool

func newIdents(declared map[string]bool, imports []importName) idents {
	taken := idents{"Registry": true}
	for n := range declared {
		taken[n] = true
	}
	for _, imp := range imports {
		taken[imp.name] = true
	}
	return taken
}

// free returns name, or name with the smallest number appended that makes
// it free, and takes it.
func (t idents) free(name string) string {
	id := name
	for n := 2; t[id]; n++ {
		id = name + strconv.Itoa(n)
	}
	t[id] = true
	return id
}

// commentName is a file name as a comment shows it: as it is when every
// character is printable, else as a Go string literal with the rest
// escaped. A name cannot then end the comment's line, split the header
// that marks the file as generated, or hide text behind bidirectional-text
// controls.
func commentName(name string) string {
	q := strconv.QuoteToGraphic(name)
	if q[1:len(q)-1] == name {
		return name
	}
	return q
}

// rolesLit are the roles an entry serves as a Go expression: a slice of
// constants, which the compiler lays out as static data.
func rolesLit(roles []string) jen.Code {
	lits := make([]jen.Code, len(roles))
	for i, r := range roles {
		lits[i] = jen.Lit(r)
	}
	return jen.Index().String().Values(lits...)
}

// importName is the name the generated file imports a package under.
type importName struct {
	path, name string
	alias      bool // name is not the package's own
}

// importNames gives every imported package its own name: the real package
// name where it is free, else the name with the smallest free number
// appended. kvgen assigns them itself because jennifer's collision search
// grows with the cube of the number of same-named packages. adapt says
// whether the file holds adapters, which name context.
func importNames(c renderContract, entries []renderEntry, declared map[string]bool, adapt bool) []importName {
	// The registry package keeps its name unless the output package
	// declares it.
	reg := importName{path: load.RegistryPath, name: "registry"}
	if declared[reg.name] {
		reg.name, reg.alias = "kvregistry", true
	}
	imports := []importName{reg}
	named := map[string]bool{load.RegistryPath: true}
	// Besides the imports, the file uses these identifiers; an import
	// named like one of them would shadow it or be shadowed.
	taken := map[string]bool{reg.name: true, "Registry": true, "string": true}
	if adapt {
		// An adapter's parameters and the predeclared names its types
		// may use.
		for _, n := range append(c.Adapter.names(), "error", "any") {
			taken[n] = true
		}
	}
	for name := range declared {
		taken[name] = true
	}
	// An alias is never another imported package's own name, so that
	// package can keep it.
	realNames := map[string]bool{"registry": true, c.PkgName: true}
	if adapt {
		for _, name := range c.Imports {
			realNames[name] = true
		}
	}
	for _, e := range entries {
		realNames[e.PkgName] = true
	}
	// Counters remember where each name's search stopped, so that N
	// packages with one name cost O(N), not O(N^2).
	next := map[string]int{}
	add := func(path, name string) {
		if named[path] {
			return
		}
		named[path] = true
		imp := importName{path: path, name: name}
		if taken[imp.name] {
			n := max(next[imp.name], 2)
			for taken[imp.name+strconv.Itoa(n)] || realNames[imp.name+strconv.Itoa(n)] {
				n++
			}
			next[imp.name] = n + 1
			imp.name, imp.alias = imp.name+strconv.Itoa(n), true
		}
		taken[imp.name] = true
		imports = append(imports, imp)
	}
	add(c.Path, c.PkgName)
	if adapt {
		// The packages the adapters' signatures name: the standard
		// library's first, as goimports groups them.
		paths := slices.Sorted(maps.Keys(c.Imports))
		slices.SortStableFunc(paths, func(a, b string) int { return cmpBool(!load.Std(a), !load.Std(b)) })
		for _, path := range paths {
			add(path, c.Imports[path])
		}
	}
	for _, e := range entries {
		add(e.ImportPath, e.PkgName)
	}
	return imports
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
