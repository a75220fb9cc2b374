package gen

import (
	"context"
	"fmt"
	"go/token"
	"go/types"
	"slices"

	"github.com/dave/jennifer/jen"
	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Contract is what a manifest's constructors are checked against: the
// type a manifest's factory: names, by default the KV connector
// contract's [DefaultFactory].
//
// What a contract needs beyond its type is data on the type, in marker
// lines of its doc comment, which kvgen reads from the contract package's
// source: [MarkerRoles] declares the roles its plugins serve, and
// [MarkerRegistry] the function that turns the generated table into the
// registry a host uses, and [MarkerSelect] how a config says which
// entries a deployment links.
type Contract struct {
	// Path and Name are the import path and name of the type factory:
	// names.
	Path, Name string
	// PkgName is the name of the package at Path.
	PkgName string
	// Interface is set when the type is an interface: constructors take
	// no arguments and return it, or a type that implements it.
	Interface bool
	// Signature is the signature a constructor has, with types qualified
	// by package name, such as "func(next http.Handler, cfg
	// json.RawMessage) (http.Handler, error)".
	Signature string
	// Roles are the roles the contract declares, in the order its marker
	// lists them; none for a contract without roles.
	Roles []Role
	// Registry names the function of the contract's package that the
	// generated file passes its table to, or is "" when the generated
	// Registry is the table itself.
	Registry string
	// Select is the contract's rule for reading which entries a config
	// selects, or nil when it declares none.
	Select *Select

	// imports are the packages Signature names, by import path, with the
	// names they call them by: what an adapter function's file imports.
	imports map[string]string
	// adapter is what an adapter function of a function contract
	// declares, in terms the generated file renders.
	adapter adapterSig
	// typ is the contract's type, as LoadContract read it; a contract
	// read for a run's result, which keeps no types, has none.
	typ types.Type
	// module is the module LoadContract found its package in.
	module *packages.Module
}

// Type returns the contract's type, for a contract that [LoadContract]
// returned, or nil: what `kvgen new -factory` scaffolds a constructor of.
func (c *Contract) Type() types.Type { return c.typ }

// Module returns the module of the contract's package as the go command
// listed it, for a contract that [LoadContract] returned: nil for the
// standard library's. It is what a plugin module scaffolded by `kvgen new
// -factory -module` requires.
func (c *Contract) Module() *packages.Module { return c.module }

// Role is one role a contract declares.
type Role struct {
	// Name is the role's name, as a manifest's roles: lists it.
	Name string
	// Interface names an interface of the contract's package that the
	// concrete result of a constructor must implement for an entry that
	// serves the role, or is "".
	Interface string
}

// The markers a contract type's doc comment may hold, each on a line of
// its own:
//
//	//kvgen:roles scheduler=Scheduler worker=Worker
//	//kvgen:registry NewRegistry
//	//kvgen:select kv_connector children=kv_connector_extra_config.connectors multi=NewMultiConnector
const (
	// MarkerRoles declares the roles, each name=Interface or a bare name.
	MarkerRoles = "//kvgen:roles"
	// MarkerRegistry names a function of the contract's package that
	// takes the generated *registry.Table[F] and returns the registry.
	MarkerRegistry = "//kvgen:registry"
	// MarkerSelect declares how a config, a JSON object, selects
	// entries: see [Select].
	MarkerSelect = "//kvgen:select"
)

// Select is a contract's rule, declared with [MarkerSelect], for reading
// which entries a config selects, a JSON object such as vLLM's
// --kv-transfer-config: what kvgen build -for links. The marker's line
// is the key path that names an entry, then options:
//
//	//kvgen:select NAME [children=PATH] [multi=Func] [keys=KEY,KEY,...]
//
// A path is keys joined by dots, each a key of the object the one before
// it names.
type Select struct {
	// Name is the path of the string that names the entry a config
	// selects; a config must have it.
	Name string
	// Children is the path, in the config of an entry that has children,
	// of the list of their configs, each selecting as a config does; ""
	// when entries have none.
	Children string
	// Multi names the function of the contract's package whose entries
	// have children, whose configs must list at least one. When it is
	// "", every config that has the Children path lists children.
	Multi string
	// Keys, when not nil, are the only keys a config, or a child's, may
	// have.
	Keys []string

	// path is the contract's package, and marked the functions it marks
	// with //kvgen:constructor: an entry without constructor: links the
	// one marked.
	path   string
	marked []string
}

// HasChildren reports whether an entry whose constructor is
// importPath.constructor (constructor "" for the one its package marks)
// is one whose config lists children: its constructor is s.Multi, or,
// when s.Multi is "", any.
func (s *Select) HasChildren(importPath, constructor string) bool {
	switch {
	case s.Children == "":
		return false
	case s.Multi == "":
		return true
	case importPath != s.path:
		return false
	case constructor == "":
		return len(s.marked) == 1 && s.marked[0] == s.Multi
	}
	return constructor == s.Multi
}

// DefaultFactory is the contract of a manifest without factory:.
const DefaultFactory = kvPath + ".Factory"

// String is the contract as the manifest names it.
func (c *Contract) String() string { return c.Path + "." + c.Name }

// RoleNames returns the names of the roles the contract declares.
func (c *Contract) RoleNames() []string {
	names := make([]string, len(c.Roles))
	for i, r := range c.Roles {
		names[i] = r.Name
	}
	return names
}

// RolesOf returns the names of the roles e serves: those its manifest
// entry lists, or every role the contract declares when it lists none.
// It is nil for a contract without roles.
func (c *Contract) RolesOf(e *Entry) []string {
	if len(c.Roles) == 0 {
		return nil
	}
	if e.Roles != nil {
		return e.Roles
	}
	return c.RoleNames()
}

// typeName is the type of the contract's constructors, as the generated
// file names it: "contract.Middleware", or "func() contract.Plugin".
func (c renderContract) typeName() string {
	if c.Interface {
		return "func() " + c.PkgName + "." + c.Name
	}
	return c.PkgName + "." + c.Name
}

// ContractOf returns the contract a manifest names, before its types are
// read.
func ContractOf(m *manifest.Manifest) *Contract {
	path, name, ok := m.Contract()
	if !ok {
		path, name, _ = manifest.ParseFactory(DefaultFactory)
	}
	return &Contract{Path: path, Name: name}
}

// typedContract is a contract in one type universe: a named function
// type, or an interface, and the interfaces of its roles.
type typedContract struct {
	named types.Type
	sig   *types.Signature // the function type's, or nil
	iface *types.Interface // the interface, or nil
	// signature is Contract.Signature.
	signature string
	// roles are the contract's roles, and pkgName its package's name.
	roles   []contractRole
	pkgName string
}

// contractRole is a declared role in a type universe.
type contractRole struct {
	name, ifaceName string
	iface           *types.Interface // nil for a role without one
}

// str shows a type in a message, its packages by name.
func str(t types.Type) string { return types.TypeString(t, (*types.Package).Name) }

// typeContract finds the type c names in its package, and returns its
// types, and c filled in; c's Roles and Registry, read from the package's source
// by readMarkers, are checked against the package's types. It returns a
// problem in words instead when the type cannot be a contract.
func typeContract(pkg *types.Package, c Contract) (*typedContract, Contract, string) {
	obj := pkg.Scope().Lookup(c.Name)
	if obj == nil {
		msg := fmt.Sprintf("package %s has no type %s", suggest.Quote(c.Path), suggest.Quote(c.Name))
		if near := suggest.Nearest(c.Name, exported[*types.TypeName](pkg), 3); len(near) > 0 {
			msg += "; did you mean " + quoteJoin(near) + "?"
		}
		return nil, c, msg
	}
	tn, ok := obj.(*types.TypeName)
	if !ok {
		return nil, c, fmt.Sprintf("%s.%s is a %s, not a type; factory: names a function type or an interface", pkg.Name(), c.Name, objectKind(obj))
	}
	t := types.Unalias(tn.Type())
	if n, ok := t.(*types.Named); ok && n.TypeParams().Len() > 0 {
		return nil, c, fmt.Sprintf("%s.%s is generic; name a type without type parameters, whose constructors kvgen can check", pkg.Name(), c.Name)
	}
	ac := &typedContract{named: t, pkgName: pkg.Name()}
	imports := map[string]string{}
	named := func(p *types.Package) string {
		imports[p.Path()] = p.Name()
		return p.Name()
	}
	switch u := t.Underlying().(type) {
	case *types.Signature:
		ac.sig = u
		c.Signature = types.TypeString(u, named)
		c.adapter = newAdapterSig(u)
	case *types.Interface:
		ac.iface = u
		c.Interface = true
		c.Signature = "func() " + types.TypeString(t, named)
		c.adapter = adapterSig{results: []jen.Code{typeCode(t)}}
	default:
		return nil, c, fmt.Sprintf("%s.%s is %s, neither a function type nor an interface; factory: names the type every constructor is, or returns", pkg.Name(), c.Name, kindOf(u))
	}
	c.PkgName, c.imports = pkg.Name(), imports
	ac.signature = c.Signature
	for _, r := range c.Roles {
		cr := contractRole{name: r.Name, ifaceName: r.Interface}
		if r.Interface != "" {
			tn, ok := pkg.Scope().Lookup(r.Interface).(*types.TypeName)
			if !ok || !types.IsInterface(tn.Type()) {
				return nil, c, fmt.Sprintf("%s.%s's %s line names %s for the role %s, which is not an interface of package %s",
					pkg.Name(), c.Name, MarkerRoles, suggest.Quote(r.Interface), suggest.Quote(r.Name), suggest.Quote(c.Path))
			}
			cr.iface = tn.Type().Underlying().(*types.Interface)
		}
		ac.roles = append(ac.roles, cr)
	}
	if c.Registry != "" {
		if problem := checkRegistryFunc(pkg, c.Registry, t, ac); problem != "" {
			return nil, c, fmt.Sprintf("%s.%s's %s line: %s", pkg.Name(), c.Name, MarkerRegistry, problem)
		}
	}
	return ac, c, ""
}

// errorType is the predeclared type error.
var errorType = types.Universe.Lookup("error").Type()

// checkRegistryFunc checks that name is a function of pkg that takes the
// generated *registry.Table of the contract's factories, and returns one
// value: the registry.
func checkRegistryFunc(pkg *types.Package, name string, t types.Type, ac *typedContract) string {
	fn, ok := pkg.Scope().Lookup(name).(*types.Func)
	if !ok {
		return fmt.Sprintf("package %s has no function %s", suggest.Quote(pkg.Path()), suggest.Quote(name))
	}
	sig := fn.Type().(*types.Signature)
	want := "func(*registry.Table[" + str(ac.factoryType()) + "]) R"
	if sig.TypeParams().Len() > 0 || sig.Params().Len() != 1 || sig.Results().Len() != 1 || sig.Variadic() {
		return fmt.Sprintf("%s.%s is %s; want %s", pkg.Name(), name, str(sig), want)
	}
	p, ok := sig.Params().At(0).Type().(*types.Pointer)
	if !ok {
		return fmt.Sprintf("%s.%s is %s; want %s", pkg.Name(), name, str(sig), want)
	}
	n, ok := types.Unalias(p.Elem()).(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != load.RegistryPath || n.Obj().Name() != "Table" ||
		n.TypeArgs().Len() != 1 || !types.Identical(n.TypeArgs().At(0), ac.factoryType()) {
		return fmt.Sprintf("%s.%s is %s; want %s", pkg.Name(), name, str(sig), want)
	}
	return ""
}

// factoryType is the type of the table's factories: the function type, or
// a function that returns the interface.
func (ac *typedContract) factoryType() types.Type {
	if ac.iface != nil {
		return types.NewSignatureType(nil, nil, nil, nil, types.NewTuple(types.NewParam(token.NoPos, nil, "", ac.named)), false)
	}
	return ac.named
}

// check returns what keeps a constructor of signature sig from fitting
// the contract, in Go terms, or "" if it fits. A constructor whose result
// is a type that implements the interface the contract returns fits
// through an adapter, and check sets e.Adapt; its result must then also
// implement the interface of every role the entry serves.
func (ac *typedContract) check(sig *types.Signature, e *Entry) string {
	if sig.TypeParams().Len() > 0 {
		return "is generic; a constructor must be a plain function " + ac.signature
	}
	want := ac.sig
	if ac.iface != nil {
		want = ac.factoryType().(*types.Signature)
	}
	if sig.Params().Len() != want.Params().Len() {
		return fmt.Sprintf("has %d parameters; want %d: %s", sig.Params().Len(), want.Params().Len(), ac.signature)
	}
	if problem := paramProblem(sig, want, str); problem != "" {
		return problem
	}
	if sig.Variadic() != want.Variadic() {
		return fmt.Sprintf("is %s; want %s", str(sig), ac.signature) // variadic where the contract is not, or the other way
	}
	if sig.Results().Len() != want.Results().Len() {
		return fmt.Sprintf("has %d result(s); want %d: %s", sig.Results().Len(), want.Results().Len(), ac.signature)
	}
	var concrete types.Type // the result an adapter returns as an interface
	for i := range sig.Results().Len() {
		got, wantT := sig.Results().At(i).Type(), want.Results().At(i).Type()
		iface, isIface := wantT.Underlying().(*types.Interface)
		switch {
		case types.Identical(got, wantT):
			continue
		case isIface && !types.Identical(wantT, errorType) && types.Implements(got, iface):
			// An error result is not adapted: a typed nil would turn
			// into a non-nil error.
			e.Adapt = true
			if concrete == nil {
				concrete = got
			}
			continue
		case isIface && !types.Identical(wantT, errorType):
			return fmt.Sprintf("result %d is %s; want %s or a type that implements it%s", i+1, str(got), str(wantT), missing(got, iface, str))
		}
		return fmt.Sprintf("result %d is %s; want %s", i+1, str(got), str(wantT))
	}
	if concrete == nil || types.IsInterface(concrete) {
		return "" // which roles it serves is only known at run time
	}
	for _, r := range ac.roles {
		if r.iface == nil || e.Roles != nil && !slices.Contains(e.Roles, r.name) {
			continue
		}
		if !types.Implements(concrete, r.iface) {
			return fmt.Sprintf("returns %s, which does not implement %s.%s%s, but the entry serves the %s role; implement it, or set roles: to the roles it serves",
				str(concrete), ac.pkgName, r.ifaceName, missing(concrete, r.iface, str), r.name)
		}
	}
	return ""
}

// paramProblem says which parameter of sig differs from want's, which has
// as many.
func paramProblem(sig, want *types.Signature, str func(types.Type) string) string {
	for i := range sig.Params().Len() {
		got, wantT := sig.Params().At(i).Type(), want.Params().At(i).Type()
		if !types.Identical(got, wantT) {
			if sig.Variadic() && i == sig.Params().Len()-1 {
				return fmt.Sprintf("parameter %d is variadic ...%s; want %s", i+1, str(got.(*types.Slice).Elem()), str(wantT))
			}
			return fmt.Sprintf("parameter %d is %s; want %s", i+1, str(got), str(wantT))
		}
	}
	return ""
}

// kindOf names the kind of an underlying type, as a message says it.
func kindOf(t types.Type) string {
	switch t := t.(type) {
	case *types.Struct:
		return "a struct type"
	case *types.Basic:
		return "a " + t.Name() + " type"
	case *types.Map:
		return "a map type"
	case *types.Slice:
		return "a slice type"
	case *types.Array:
		return "an array type"
	case *types.Pointer:
		return "a pointer type"
	case *types.Chan:
		return "a channel type"
	}
	return "a type"
}

// LoadContract resolves the type factory names (IMPORT/PATH.TypeName), as
// a manifest's factory: does, loading its package as the go command does
// in dir with env: what `kvgen new` scaffolds a constructor of.
func LoadContract(ctx context.Context, dir string, env []string, factory string) (*Contract, error) {
	path, name, err := manifest.ParseFactory(factory)
	if err != nil {
		return nil, err
	}
	if err := gocmd.CheckModuleFiles(dir, env); err != nil {
		return nil, err
	}
	cfg := &packages.Config{Context: ctx, Dir: dir, Env: gocmd.ForListing(env), Mode: packages.NeedName | packages.NeedExportFile | packages.NeedModule}
	pkgs, err := packages.Load(cfg, path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	if len(pkgs) != 1 || len(pkgs[0].Errors) > 0 || pkgs[0].ExportFile == "" {
		msg := "does not build"
		if len(pkgs) == 1 && len(pkgs[0].Errors) > 0 {
			msg = load.FoldLines(pkgs[0].Errors[0].Msg)
		}
		return nil, fmt.Errorf("factory %s: package %s: %s", suggest.Quote(factory), suggest.Quote(path), msg)
	}
	pkg, err := readExport(token.NewFileSet(), map[string]*types.Package{}, pkgs[0])
	if err != nil {
		return nil, err
	}
	ac, c, problem := typeContract(pkg, Contract{Path: path, Name: name})
	if problem != "" {
		return nil, fmt.Errorf("factory %s: %s", suggest.Quote(factory), problem)
	}
	c.typ, c.module = ac.named, pkgs[0].Module
	return &c, nil
}

// withMarkers is c with what mk declares.
func (c Contract) withMarkers(mk markers) Contract {
	c.Roles, c.Registry, c.Select = mk.roles, mk.registry, mk.sel
	if c.Select != nil {
		c.Select.path = c.Path
	}
	return c
}

// ReadMarkers reads the markers of the contract factory names
// (IMPORT/PATH.TypeName; "" for [DefaultFactory]) from its package's
// source, listed as the go command lists it in dir, with env and the
// build flags: the contract's Path, Name, Roles, Registry and Select, and
// nothing of its types. The package is neither type-checked nor built:
// kvgen build -for reads which entries a config selects with it, before
// anything loads.
func ReadMarkers(ctx context.Context, dir string, env, flags []string, factory string) (*Contract, error) {
	if factory == "" {
		factory = DefaultFactory
	}
	path, name, err := manifest.ParseFactory(factory)
	if err != nil {
		return nil, err
	}
	cfg := &packages.Config{Context: ctx, Dir: dir, Env: env, BuildFlags: flags, Mode: packages.NeedName | packages.NeedFiles}
	if err := gocmd.CheckModuleFiles(cfg.Dir, cfg.Env); err != nil {
		return nil, err
	}
	pkgs, err := packages.Load(cfg, path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	if len(pkgs) != 1 || len(pkgs[0].Errors) > 0 && len(pkgs[0].GoFiles) == 0 {
		msg := "was not found"
		if len(pkgs) == 1 {
			msg = load.FoldLines(pkgs[0].Errors[0].Msg)
		}
		return nil, fmt.Errorf("factory %s: package %s: %s", suggest.Quote(factory), suggest.Quote(path), msg)
	}
	src := load.NewSourceFiles(pkgs[0])
	files, err := src.Holding(name)
	if err != nil {
		return nil, fmt.Errorf("factory %s: reading its markers: %w", suggest.Quote(factory), err)
	}
	if !declaresType(files, name) {
		return nil, fmt.Errorf("factory %s: package %s has no type %s", suggest.Quote(factory), suggest.Quote(path), suggest.Quote(name))
	}
	mk, problem := readMarkers(src.Holding, name)
	if problem != "" {
		return nil, fmt.Errorf("factory %s: %s", suggest.Quote(factory), problem)
	}
	c := Contract{Path: path, Name: name, PkgName: pkgs[0].Name}.withMarkers(mk)
	return &c, nil
}

// ReadContract reads the type that m's factory: names (named, by default
// DefaultFactory) from its package as l lists it: its types from the
// export data, and the markers of its doc comment from the source. It
// returns the contract filled in; a problem is reported at factory:, and
// then it returns named, with ok false.
func ReadContract(errs *diag.List, m *manifest.Manifest, named *Contract, l *load.Listing) (c *Contract, ok bool) {
	pkg, missing := l.ContractPkg, l.ContractMissing()
	at := func(format string, args ...any) (*Contract, bool) {
		pos := m.Factory.Pos
		if !m.Factory.Set {
			pos = token.Position{Filename: m.File, Line: 1, Column: 1}
		}
		errs.Add(pos, "factory %s: %s", suggest.Quote(named.String()), fmt.Sprintf(format, args...))
		return named, false
	}
	switch {
	case pkg == nil:
		return at("package %s was not loaded", suggest.Quote(named.Path))
	case missing != nil:
		return at("package %s: %v", suggest.Quote(named.Path), missing)
	case len(pkg.Errors) > 0:
		// Without the position, which may lie in the loader package.
		return at("package %s: %s", suggest.Quote(named.Path), load.FoldLines(pkg.Errors[0].Msg))
	case pkg.ExportFile == "":
		return at("package %s does not build", suggest.Quote(named.Path))
	}
	tpkg, err := readExport(token.NewFileSet(), map[string]*types.Package{}, pkg)
	if err != nil {
		return at("%v", err)
	}
	mk, problem := readMarkers(load.NewSourceFiles(pkg).Holding, named.Name)
	if problem != "" {
		return at("%s", problem)
	}
	marked := named.withMarkers(mk)
	_, filled, problem := typeContract(tpkg, marked)
	if problem != "" {
		return at("%s", problem)
	}
	return &filled, true
}
