// Package templates holds the text/template files kvgen renders for what is
// not the registry: the scaffold of a new connector module (`kvgen new`) and
// the Markdown table of a manifest's connectors (`kvgen doc`). The registry
// itself is emitted with jennifer only.
//
// It serves the kvgen command, and tools that scaffold a connector or
// document a manifest as kvgen new and kvgen doc do.
package templates

import (
	"bytes"
	"embed"
	"fmt"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"golang.org/x/mod/modfile"
	"golang.org/x/tools/go/ast/astutil"

	"github.com/kvgen/kvgen/internal/load"
)

//go:embed connector/*.tmpl plugin/*.tmpl doc.md.tmpl
var files embed.FS

// ConnectorScaffold is what the module of a new KV connector (kvgen new)
// is rendered from; PluginScaffold is its like for other contracts. A
// scaffold is source to write, not a manifest entry: hence not Entry.
type ConnectorScaffold struct {
	// Name is the connector's registry name, also its package name.
	Name string
	// Module is the new module's path.
	Module string
	// GoVersion is the go directive of the new go.mod.
	GoVersion string
	// KVGenVersion is the version of github.com/kvgen/kvgen to require.
	KVGenVersion string
	// Replace, if set, is a local directory that replaces
	// github.com/kvgen/kvgen, for developing against an unreleased kvgen,
	// as go.mod writes it: relative to the new module, as kvgen new
	// gives it.
	Replace string
}

// RenderConnectorScaffold returns the scaffold's files by their path in
// the new module. Go files are gofmt'd; go.mod is written with x/mod,
// which quotes paths that need it.
func RenderConnectorScaffold(s ConnectorScaffold) (map[string][]byte, error) {
	gomod, err := goMod(s)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{"go.mod": gomod}
	err = fs.WalkDir(files, "connector", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := render(p, s)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(path.Base(p), ".tmpl")
		if strings.HasSuffix(name, ".go") {
			if data, err = format.Source(data); err != nil {
				return fmt.Errorf("template %s: %w", p, err)
			}
		}
		out[name] = data
		return nil
	})
	return out, err
}

func goMod(s ConnectorScaffold) ([]byte, error) {
	f := new(modfile.File)
	if err := f.AddModuleStmt(s.Module); err != nil {
		return nil, err
	}
	if err := f.AddGoStmt(s.GoVersion); err != nil {
		return nil, err
	}
	if err := f.AddRequire("github.com/kvgen/kvgen", s.KVGenVersion); err != nil {
		return nil, err
	}
	if s.Replace != "" {
		if err := f.AddReplace("github.com/kvgen/kvgen", "", s.Replace, ""); err != nil {
			return nil, err
		}
	}
	return f.Format()
}

// PluginScaffold is what the package of a new plugin of a contract other
// than the KV connector's is rendered from.
type PluginScaffold struct {
	// Name is the package's name.
	Name string
	// Contract is the contract as factory: names it; TypeName the type of
	// its constructors as Go code names it, such as "middleware.Factory".
	Contract, TypeName string
	// Params and Results are the constructor's parameter and result lists.
	Params, Results string
	// Return is what the stub returns; Call is the test's call of it.
	Return, Call string
	// ReturnsError is set when Return, or a method's, holds an error,
	// which imports errors.
	ReturnsError bool
	// Imports are the packages the files may name; each file keeps those
	// it does.
	Imports []Import
	// Impl, for an interface contract, is the type New returns a pointer
	// to, declared with a stub of each of Methods; "" for a function
	// type contract. Embed, if set, is the interface, which Impl embeds
	// when some method cannot be declared outside its package.
	Impl, Embed string
	Methods     []Method
}

// Import is an imported package and the name the code calls it by.
type Import struct{ Path, Name string }

// Method is a stub method of PluginScaffold.Impl: func (NAME) Name
// Signature { return Return }.
type Method struct{ Name, Signature, Return string }

// RenderPluginScaffold returns the new plugin package's files by name: its
// constructor, marked for kvgen, and a test that checks it fits the
// contract and calls it.
func RenderPluginScaffold(p PluginScaffold) (map[string][]byte, error) {
	out := map[string][]byte{}
	p.Imports = slices.Clone(p.Imports)
	for i, imp := range p.Imports {
		if path.Base(imp.Path) == imp.Name {
			p.Imports[i].Name = "" // no alias where the package's name is its path's
		}
	}
	for _, name := range []string{"plugin.go", "plugin_test.go"} {
		data, err := render("plugin/"+name+".tmpl", p)
		if err != nil {
			return nil, err
		}
		file := strings.Replace(name, "plugin", p.Name, 1)
		if data, err = dropUnusedImports(file, data); err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		out[file] = data
	}
	return out, nil
}

// dropUnusedImports formats the Go file src without the imports it does
// not use: a scaffold's files import every package the contract's
// signatures name, and each file uses some. An import without a name is
// used by its path's last element, as RenderPluginScaffold names them.
func dropUnusedImports(name string, src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	for _, imp := range slices.Clone(f.Imports) {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || astutil.UsesImport(f, p) {
			continue
		}
		local := ""
		if imp.Name != nil {
			local = imp.Name.Name
		}
		astutil.DeleteNamedImport(fset, f, local, p)
	}
	var buf bytes.Buffer
	if err := format.Node(&buf, fset, f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DocRow is one connector in the `kvgen doc` table.
type DocRow struct {
	Name, Aliases, Roles, Import, Constructor, Module, Summary string
}

// RenderDoc renders the Markdown table of a manifest's connectors; factory
// is the type of the constructors of the contract the manifest's factory:
// names (a func() returning it, for an interface), or "" for the KV
// connectors', whose table has a column of roles.
func RenderDoc(manifest, factory string, rows []DocRow) ([]byte, error) {
	return render("doc.md.tmpl", struct {
		Manifest, Factory string
		Rows              []DocRow
	}{manifest, factory, rows})
}

func render(name string, data any) ([]byte, error) {
	t, err := template.New(path.Base(name)).Funcs(template.FuncMap{
		"cell": cell,
		"std":  load.Std, // scaffolds import the standard library first
	}).ParseFS(files, name)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

// packageName is what a scaffold's name must be: the name doubles as the
// Go package name, so it is a plain lower-case identifier.
var packageName = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

// reservedNames are the packages the scaffolds import: a package named
// like one would shadow it.
var reservedNames = map[string]bool{
	"context": true, "errors": true, "fmt": true, "fs": true, "os": true, "filepath": true,
	"testing": true, "registry": true, "conformance": true,
}

// CheckName reports whether name can name a scaffold: a lower-case Go
// package name that is no keyword and shadows no package the scaffold
// imports.
func CheckName(name string) error {
	switch {
	case !packageName.MatchString(name):
		return fmt.Errorf("connector name %q: want a lower-case Go package name such as %q", name, strings.ToLower(nonAlnum.ReplaceAllString(name, "")))
	case token.IsKeyword(name):
		return fmt.Errorf("connector name %q is a Go keyword and cannot name a package; choose another", name)
	case reservedNames[name]:
		return fmt.Errorf("connector name %q: the scaffold's code and tests import a package of that name; choose another", name)
	}
	return nil
}
