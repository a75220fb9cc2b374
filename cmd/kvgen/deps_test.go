package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kvRuntime is the KV connector contract's package: the tool reads its
// markers as data, and links none of it.
const kvRuntime = "github.com/kvgen/kvgen/registry/kv"

// The kvgen binary treats the KV contract as any other: it does not link
// the KV runtime, whose config parsing kvgen build -for once called. A
// contract's rules are data its markers declare. Nor does it link the
// testing package, which x/tools/imports brought in once, and with it
// every go tool kvgen run checked its build of a dozen packages more.
func TestToolDoesNotLinkKVRuntime(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	for dep := range strings.Lines(string(out)) {
		if dep = strings.TrimSpace(dep); dep == kvRuntime || strings.HasPrefix(dep, kvRuntime+"/") {
			t.Errorf("cmd/kvgen depends on %s; find the importer with: go list -f '{{.ImportPath}}: {{.Imports}}' -deps ./cmd/kvgen | grep %s", dep, kvRuntime)
		}
		if dep == "testing" {
			t.Errorf("cmd/kvgen links the testing package; find the importer with: go list -f '{{.ImportPath}}: {{.Imports}}' -deps ./cmd/kvgen | grep -w testing")
		}
	}
}

// maxFuncLines is the most lines a function of the tool may span: one that
// is longer does several things, which get names of their own.
const maxFuncLines = 80

// Every function of the tool's code (cmd and internal, not tests, not
// generated) fits on a screen.
func TestToolFunctionsAreShort(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range []string{"../../cmd", "../../internal"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && d.Name() == "testdata":
				return filepath.SkipDir
			case d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go"):
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil || ast.IsGenerated(f) {
				return err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
				if n := end.Line - start.Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines, more than %d; give its steps names of their own", start, fn.Name.Name, n, maxFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
