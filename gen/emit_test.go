package gen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry"
)

// The names the generated file declares (the entries, the adapters) and
// those it uses (context, an adapter's parameters) give way to what the
// package's other files declare and to the packages it imports, whatever
// they are called.
func TestEmitAvoidsTheNamesOfThePackage(t *testing.T) {
	reg, c := registryPackage(t)
	declared := map[string]bool{"entries": true, "adapt_x": true, "context": true}
	imports := map[string]*types.Package{RegistryPath: reg}
	for _, p := range reg.Imports() {
		p.MarkComplete()
		imports[p.Path()] = p
	}
	var entries []*Entry
	// Package names that are the file's own names, each with an adapted
	// constructor.
	for i, name := range []string{"x", "entries", "context", "ctx", "cfg", "role", "error", "adapt_x2"} {
		p := "example.com/" + name
		lp := madeUpPackage(p, c)
		lp.types = types.NewPackage(p, name)
		sig := types.NewSignatureType(nil, nil, nil, c.factory.Params(),
			types.NewTuple(types.NewParam(token.NoPos, nil, "", reg.Scope().Lookup("Worker").Type()), c.factory.Results().At(1)), false)
		lp.types.Scope().Insert(types.NewFunc(token.NoPos, lp.types, "New", sig))
		lp.types.MarkComplete()
		imports[p] = lp.types
		entries = append(entries, &Entry{Name: []string{"x", "x-", "x.", "ctx", "cfg", "role", "error", "y"}[i],
			ImportPath: p, PkgName: name, Constructor: "New", Adapt: true, Roles: registry.NewRoleSet()})
	}
	src, err := emit("connectors.yaml", "kvcase", &kvContract, "", entries, declared)
	require.NoError(t, err)

	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "connectors_gen.go", src, 0)
	require.NoError(t, err, "%s", src)
	// The other file, declaring what declared says.
	other, err := parser.ParseFile(fset, "other.go", "package kvcase\n\nvar entries, adapt_x, context int\n", 0)
	require.NoError(t, err)
	conf := types.Config{Importer: importerFunc(func(p string) (*types.Package, error) { return imports[p], nil })}
	_, err = conf.Check("kvcase", fset, []*ast.File{f, other}, nil)
	require.NoError(t, err, "%s", src)
}
