package gen

import (
	"bytes"
	"context"
	"fmt"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Contract is what a manifest's constructors are checked against: the KV
// connector's kv.Factory, or the type a manifest's factory: names.
type Contract struct {
	// Path and Name are the import path and name of the type factory:
	// names; both are "" for the KV connector contract.
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
	// Imports are the packages Signature, Params and Results name, by
	// import path, with the names they call them by.
	Imports map[string]string
	// Params and Results are the zero values of a constructor's
	// parameters and results, as Go expressions: what a stub returns, and
	// what a test of it passes.
	Params, Results []string
	// ParamList and ResultList are a constructor's parameter and result
	// lists as Go source writes them, such as "(next http.Handler, cfg
	// json.RawMessage)" and "(http.Handler, error)".
	ParamList, ResultList string
	// ReturnsError is set when a constructor's last result is an error.
	ReturnsError bool
}

// KV reports whether c is the KV connector contract.
func (c *Contract) KV() bool { return c.Path == KVPath && c.Name == "Factory" }

// String is the contract as the manifest names it.
func (c *Contract) String() string { return c.Path + "." + c.Name }

// typeName is the type of the contract's constructors, as the generated
// file names it: "contract.Middleware", or "func() contract.Plugin".
func (c *Contract) typeName() string {
	if c.Interface {
		return "func() " + c.PkgName + "." + c.Name
	}
	return c.PkgName + "." + c.Name
}

// kvContract is the contract of a manifest without factory:.
var kvContract = Contract{
	Path:      KVPath,
	Name:      "Factory",
	PkgName:   "kv",
	Signature: "func(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error)",
	Imports:   map[string]string{"context": "context", KVPath: "kv"},
}

// contractOf returns the contract a manifest names, before its types are
// read.
func contractOf(m *manifest.Manifest) *Contract {
	path, name, ok := m.Contract()
	if !ok || path == KVPath && name == kvContract.Name {
		c := kvContract
		return &c
	}
	return &Contract{Path: path, Name: name}
}

// anyContract is a contract other than the KV connector's, in one type
// universe: a named function type, or an interface.
type anyContract struct {
	named types.Type
	sig   *types.Signature // the function type's, or nil
	iface *types.Interface // the interface, or nil
	// signature is Contract.Signature.
	signature string
}

// str shows a type in a message, its packages by name.
func str(t types.Type) string { return types.TypeString(t, (*types.Package).Name) }

// resolveContract finds the type c names in its package, and returns it
// with c filled in. It returns a problem in words instead when the type
// cannot be a contract.
func resolveContract(pkg *types.Package, c Contract) (*anyContract, Contract, string) {
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
	ac := &anyContract{named: t}
	imports := map[string]string{}
	named := func(p *types.Package) string {
		imports[p.Path()] = p.Name()
		return p.Name()
	}
	zeros := func(tuple *types.Tuple) []string {
		var z []string
		for v := range tuple.Variables() {
			z = append(z, zero(v.Type(), named))
		}
		return z
	}
	switch u := t.Underlying().(type) {
	case *types.Signature:
		ac.sig = u
		c.Signature = types.TypeString(u, named)
		c.Params, c.Results = zeros(u.Params()), zeros(u.Results())
		if u.Variadic() {
			c.Params = c.Params[:len(c.Params)-1] // a call passes none
		}
		// A tuple prints no "...": the parameters print as a signature's.
		var params bytes.Buffer
		types.WriteSignature(&params, types.NewSignatureType(nil, nil, nil, u.Params(), nil, u.Variadic()), named)
		c.ParamList, c.ResultList = params.String(), types.TypeString(u.Results(), named)
		if n := u.Results().Len(); n > 0 {
			c.ReturnsError = types.Identical(u.Results().At(n-1).Type(), types.Universe.Lookup("error").Type())
		}
	case *types.Interface:
		ac.iface = u
		c.Interface = true
		c.Signature = "func() " + types.TypeString(t, named)
		c.Results = []string{"nil"}
		c.ParamList, c.ResultList = "()", types.TypeString(t, named)
	default:
		return nil, c, fmt.Sprintf("%s.%s is %s, neither a function type nor an interface; factory: names the type every constructor is, or returns", pkg.Name(), c.Name, kindOf(u))
	}
	c.PkgName, c.Imports = pkg.Name(), imports
	ac.signature = c.Signature
	return ac, c, ""
}

// check returns what keeps a constructor of signature sig from fitting
// the contract, in Go terms, or "" if it fits; it sets e.Adapt when the
// constructor returns a concrete type that an interface contract's
// adapter returns as the interface.
func (ac *anyContract) check(sig *types.Signature, e *Entry) string {
	if sig.TypeParams().Len() > 0 {
		return "is generic; a constructor must be a plain function " + ac.signature
	}
	want := ac.sig
	if ac.iface != nil {
		want = types.NewSignatureType(nil, nil, nil, nil, types.NewTuple(types.NewParam(token.NoPos, nil, "", ac.named)), false)
	}
	if sig.Params().Len() != want.Params().Len() {
		return fmt.Sprintf("has %d parameters; want %d: %s", sig.Params().Len(), want.Params().Len(), ac.signature)
	}
	if problem := paramProblem(sig, want, str); problem != "" {
		return problem
	}
	if sig.Results().Len() != want.Results().Len() {
		return fmt.Sprintf("has %d result(s); want %d: %s", sig.Results().Len(), want.Results().Len(), ac.signature)
	}
	for i := range sig.Results().Len() {
		got, wantT := sig.Results().At(i).Type(), want.Results().At(i).Type()
		switch {
		case types.Identical(got, wantT):
			continue
		case ac.iface != nil && types.Implements(got, ac.iface):
			e.Adapt = true
			continue
		case ac.iface != nil:
			return fmt.Sprintf("result %d is %s; want %s or a type that implements it%s", i+1, str(got), str(wantT), missing(got, ac.iface, str))
		}
		msg := fmt.Sprintf("result %d is %s; want %s", i+1, str(got), str(wantT))
		if iface, ok := wantT.Underlying().(*types.Interface); ok && types.Implements(got, iface) {
			msg += ", which a function must return to be a " + str(ac.named) + " (a function returning a type that implements it is not one)"
		}
		return msg
	}
	if ac.sig != nil && !types.AssignableTo(sig, ac.named) {
		return fmt.Sprintf("is %s; want %s", str(sig), ac.signature) // variadic where the contract is not, or the other way
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
	cfg := &packages.Config{Context: ctx, Dir: dir, Env: env, Mode: packages.NeedName | packages.NeedExportFile}
	pkgs, err := packages.Load(cfg, path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	if len(pkgs) != 1 || len(pkgs[0].Errors) > 0 || pkgs[0].ExportFile == "" {
		msg := "does not build"
		if len(pkgs) == 1 && len(pkgs[0].Errors) > 0 {
			msg = oneLine(pkgs[0].Errors[0].Msg)
		}
		return nil, fmt.Errorf("factory %s: package %s: %s", suggest.Quote(factory), suggest.Quote(path), msg)
	}
	pkg, err := readExport(token.NewFileSet(), map[string]*types.Package{}, pkgs[0])
	if err != nil {
		return nil, err
	}
	_, c, problem := resolveContract(pkg, Contract{Path: path, Name: name})
	if problem != "" {
		return nil, fmt.Errorf("factory %s: %s", suggest.Quote(factory), problem)
	}
	return &c, nil
}
