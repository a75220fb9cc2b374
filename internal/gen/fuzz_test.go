package gen

import (
	"bytes"
	"errors"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/manifest"
)

// FuzzGenerate feeds manifests through the generator: parse and validate,
// check every entry against a package, and render. What it accepts must
// render as a gofmt'd file that go/parser parses and go/types checks
// against the real registry package; what it rejects must be errors
// inside the manifest. Where the file may be written is the pipeline's
// to decide (its writable tests).
//
// The body stays fast by not running the go command per input: each entry's
// package is made up in memory, in the type universe of the registry
// package's export data (loaded once), with the constructor the entry names
// declared as a kv.Factory. An entry without a constructor finds no
// marker and is rejected, as it would be in a package without one.
func FuzzGenerate(f *testing.F) {
	seeds, err := filepath.Glob("../pipeline/testdata/*/connectors.yaml")
	require.NoError(f, err)
	require.NotEmpty(f, seeds, "the pipeline's golden manifests seed the generator's fuzzing")
	seeds = append(seeds, "../../connectors.yaml", "../../examples/kvserver/deploy/edge.yaml", "../../examples/kvserver/deploy/datacenter.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, s := range hostileManifests {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzGenerate(t, data)
	})
}

// hostileManifests are seeds that each try to get something past the
// generator: into the code, or out of a comment or a string.
var hostileManifests = []string{
	"version: 1\noutput: \"x\\u202egen.go\"\nconnectors: []\n",
	"version: 1\noutput: \"x\\npackage evil.go\"\nconnectors: []\n",
	"version: 1\noutput: \"x*/.go\"\nconnectors: []\n",
	"version: 1\noutput: ../../outside.go\nconnectors: []\n",
	"version: 1\noutput: a/b/c/reg_gen.go\npackage: reg\nconnectors:\n  - name: r\n    import: example.com/a/reg\n    constructor: New\n",
	"version: 1\nconnectors:\n  - name: \"a\\\"); panic(1); //\"\n    import: example.com/x\n    constructor: New\n",
	"version: 1\nconnectors:\n  - name: ok\n    import: \"example.com/x\\\"; panic(1)\"\n    constructor: New\n",
	"version: 1\nconnectors:\n  - name: ok\n    import: example.com/x\n    constructor: \"New() }; func init() { panic(1) }; var _ = New\"\n",
	"version: 1\nconnectors:\n  - name: ok\n    aliases: [\"x*/ func init() {} /*\", \"a\\u202eb\"]\n    import: example.com/x\n    constructor: New\n",
	"version: 1\npackage: main\nconnectors:\n  - name: a\n    import: example.com/registry\n    constructor: New\n  - name: b\n    import: example.com/other/registry\n    constructor: New\n  - name: c\n    import: example.com/fmt\n    constructor: Registry\n",
	"version: 1\nconnectors:\n  - name: a\n    import: example.com/x\n    constructor: New\n    roles: [worker]\n    aliases: [A1, A2]\n    version: v1.2.3\n    replace: ../x\n",
	"version: 1\nconnectors:\n  - &a {name: a, import: example.com/x}\n  - *a\n",
	"version: 1\nconnectors: []\n? " + string(bytes.Repeat([]byte("k"), 5000)) + "\n: 1\n",
}

var (
	registryOnce  sync.Once
	registryTypes *types.Package
	registryFset  *token.FileSet
	registryErr   error
	// kvContract is the KV connector contract, as gen resolves it.
	kvContract Contract
	kvResolved *typedContract
)

// registryPackage loads package registry's types from its export data,
// once per process.
func registryPackage(t testing.TB) (*types.Package, *typedContract) {
	registryOnce.Do(func() {
		// Package registry first, whole: package kv's export data holds
		// only the part of it that kv uses.
		pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedExportFile}, load.RegistryPath, kvPath)
		if err != nil {
			registryErr = err
			return
		}
		if len(pkgs) != 2 || pkgs[0].ExportFile == "" || pkgs[1].ExportFile == "" {
			registryErr = errors.New("no export data for " + kvPath)
			return
		}
		slices.SortFunc(pkgs, func(a, b *packages.Package) int { return strings.Compare(a.PkgPath, b.PkgPath) })
		registryFset = token.NewFileSet()
		imports := map[string]*types.Package{}
		if _, registryErr = readExport(registryFset, imports, pkgs[0]); registryErr != nil {
			return
		}
		if registryTypes, registryErr = readExport(registryFset, imports, pkgs[1]); registryErr != nil {
			return
		}
		c := Contract{Path: kvPath, Name: "Factory"}
		mk, problem := readMarkers(load.NewSourceFiles(pkgs[1]).Holding, c.Name)
		if problem == "" {
			kvResolved, kvContract, problem = typeContract(registryTypes, c.withMarkers(mk))
		}
		if problem != "" {
			registryErr = errors.New(problem)
		}
	})
	require.NoError(t, registryErr)
	return registryTypes, kvResolved
}

// madeUpPackage is a package at import path p that declares nothing yet,
// named for its last element where that is an identifier.
func madeUpPackage(p string, c *typedContract) *loadedPackage {
	name := path.Base(p)
	if !token.IsIdentifier(name) || token.IsKeyword(name) {
		name = "conn"
	}
	tp := types.NewPackage(p, name)
	tp.MarkComplete()
	return &loadedPackage{
		pkg:      &packages.Package{PkgPath: p, Name: name, Module: &packages.Module{Path: p}},
		types:    tp,
		fset:     registryFset,
		contract: c,
		src:      load.NewSourceFiles(nil),
	}
}

var generatedHeaderLine = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

func fuzzGenerate(t *testing.T, data []byte) {
	const file = "connectors.yaml"
	m, err := manifest.Parse(file, data)
	if err != nil {
		assertInManifest(t, err, file, data)
		if m != nil {
			// Only entries had problems: they are marked, and checking
			// leaves them out.
			require.True(t, slices.ContainsFunc(m.Entries, func(c manifest.Entry) bool { return c.Invalid }), "a manifest returned with errors marks the entries that have them")
		}
		return
	}
	reg, c := registryPackage(t)

	// The connectors' packages, made up: each declares the constructor its
	// first entry names, with the Factory signature, or, for a name of odd
	// length, returning kv.Worker, which the registry adapts.
	worker := reg.Scope().Lookup("Worker").Type()
	adapted := types.NewSignatureType(nil, nil, nil, c.sig.Params(),
		types.NewTuple(types.NewParam(token.NoPos, nil, "", worker), c.sig.Results().At(1)), false)
	pkgs := map[string]*loadedPackage{}
	for _, conn := range m.Entries {
		p := conn.Import.V
		lp := pkgs[p]
		if lp == nil {
			lp = madeUpPackage(p, c)
			pkgs[p] = lp
		}
		if ctor := conn.Constructor.V; ctor != "" && lp.types.Scope().Lookup(ctor) == nil {
			sig := c.sig
			if len(ctor)%2 == 1 {
				sig = adapted
			}
			lp.types.Scope().Insert(types.NewFunc(token.NoPos, lp.types, ctor, sig))
		}
	}
	pkgName := "kvcase"
	if m.Package.Set {
		pkgName = m.Package.V
	}
	var errs diag.List
	entries, err := checkEntries(&errs, m, &load.Listing{}, pkgs, "", &kvContract, true, func(s string) string { return s }, nil)
	require.NoError(t, err)
	if err := errs.Err(); err != nil {
		assertInManifest(t, err, file, data)
		return
	}
	desc, err := describe(m, &kvContract, "", entries)
	require.NoError(t, err)
	got, err := Render(newRenderInput(m.File, pkgName, &kvContract, desc, entries, map[string]bool{}))
	require.NoError(t, err, "rendering what was checked must work")

	// Accepted: the file compiles.
	first, _, _ := bytes.Cut(got, []byte("\n"))
	require.Regexp(t, generatedHeaderLine, string(first))
	formatted, err := format.Source(got)
	require.NoError(t, err)
	require.Equal(t, string(formatted), string(got), "the file is gofmt'd")

	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "registry_gen.go", got, parser.ParseComments)
	require.NoError(t, err, "%s", got)
	require.True(t, ast.IsGenerated(af))
	require.Equal(t, pkgName, af.Name.Name)
	imports := map[string]*types.Package{kvPath: reg}
	for _, p := range reg.Imports() {
		// context, which adapters name: export data holds the part of
		// it that registry uses, which is the part adapters use.
		p.MarkComplete()
		imports[p.Path()] = p
	}
	for p, lp := range pkgs {
		imports[p] = lp.types
	}
	conf := types.Config{Importer: importerFunc(func(p string) (*types.Package, error) {
		if tp, ok := imports[p]; ok {
			return tp, nil
		}
		return nil, errors.New("unexpected import " + p)
	})}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	_, err = conf.Check(pkgName, fset, []*ast.File{af}, info)
	require.NoError(t, err, "%s", got)
	assertStaticEntries(t, af, info, got)

	// Only the manifest's strings reach the file, as literals: one entry
	// per connector, Registry the only exported name, and no function but
	// adapters that call a constructor.
	var exported []string
	for _, d := range af.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			switch d.Tok {
			case token.IMPORT:
			case token.CONST:
				// The description for kvgen inspect: one string.
				require.Len(t, d.Specs, 1, "%s", got)
				v := d.Specs[0].(*ast.ValueSpec)
				require.Len(t, v.Values, 1, "%s", got)
				lit, ok := v.Values[0].(*ast.BasicLit)
				require.True(t, ok && lit.Kind == token.STRING, "%s", got)
				require.False(t, v.Names[0].IsExported(), "%s", got)
			case token.VAR:
				for _, s := range d.Specs {
					for _, n := range s.(*ast.ValueSpec).Names {
						if n.IsExported() {
							exported = append(exported, n.Name)
						}
					}
				}
			default:
				t.Fatalf("unexpected declaration in the generated file:\n%s", got)
			}
		case *ast.FuncDecl:
			require.False(t, d.Name.IsExported(), "%s", got)
			require.Len(t, d.Body.List, 1, "an adapter only calls the constructor:\n%s", got)
			ret, ok := d.Body.List[0].(*ast.ReturnStmt)
			require.True(t, ok, "%s", got)
			require.Len(t, ret.Results, 1)
			_, ok = ret.Results[0].(*ast.CallExpr)
			require.True(t, ok, "%s", got)
		}
	}
	assert.Equal(t, []string{"Registry"}, exported)
	assert.Equal(t, len(m.Entries), bytes.Count(got, []byte("\t\tFactory: ")))
}

// assertStaticEntries checks that the package's variables are static data
// but for one call of registry.MustNewTable, and of the contract's
// registry function around it: their initialisers call nothing else,
// conversions aside, so that the code the compiler generates for
// them does not grow with the number of entries. Package initialisation is
// one function, and the compiler's passes over a function cost more than
// linear time in its size.
func assertStaticEntries(t *testing.T, f *ast.File, info *types.Info, src []byte) {
	t.Helper()
	calls, wraps := 0, 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		ast.Inspect(g, func(n ast.Node) bool {
			if _, ok := n.(*ast.FuncLit); ok {
				// An adapter: its body runs when a connector is
				// created, not at initialisation, and at package level
				// it can capture nothing.
				return false
			}
			call, ok := n.(*ast.CallExpr)
			if !ok || info.Types[call.Fun].IsType() {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if ok && sel.Sel.Name == "NewRegistry" && len(call.Args) == 1 {
				wraps++
				return true
			}
			calls++
			require.True(t, ok && sel.Sel.Name == "MustNewTable" && len(call.Args) == 2 && call.Ellipsis.IsValid(),
				"a call in a variable's initialiser other than MustNewTable(description, entries...):\n%s", src)
			return true
		})
	}
	require.Equal(t, 1, calls, "%s", src)
	require.LessOrEqual(t, wraps, 1, "%s", src)
}

// assertInManifest checks that a rejection is a list of errors, each at a
// position inside the manifest.
func assertInManifest(t *testing.T, err error, file string, data []byte) {
	t.Helper()
	var list diag.List
	var one *diag.Error
	switch {
	case errors.As(err, &list):
	case errors.As(err, &one):
		list = diag.List{one}
	default:
		t.Fatalf("not a positioned error: %v", err)
	}
	require.NotEmpty(t, list)
	for _, e := range list {
		require.Equal(t, file, e.Pos.Filename, "%v", e)
		if len(data) <= manifest.MaxSize {
			require.GreaterOrEqual(t, e.Pos.Line, 1, "%v", e)
			require.LessOrEqual(t, e.Pos.Offset, len(data), "%v", e)
		}
	}
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
