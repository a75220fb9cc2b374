package pipeline

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/gofiles"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/readfile"
)

// outputPackage is the package the registry file is generated into.
type outputPackage struct {
	name string
	// declared holds the top-level names its other files declare: the
	// generated file's imports must not collide with them.
	declared map[string]bool
}

// readOutputPackage reads the directory of the file to generate: the package
// of the Go files already there (those the build tags select), else the
// manifest's package, else the directory's name.
//
// absOut is the absolute form of out, which messages show.
func readOutputPackage(m *manifest.Manifest, out, absOut string, bctx build.Context) (*outputPackage, error) {
	dir, abs := filepath.Dir(out), filepath.Dir(absOut)
	o := &outputPackage{declared: map[string]bool{}}
	existing, declaredIn, err := readPackage(abs, dir, filepath.Base(out), bctx, o.declared)
	if err != nil {
		return nil, err
	}
	if f, ok := declaredIn["Registry"]; ok {
		return nil, fmt.Errorf("%s already declares Registry, which the generated file declares; rename it", quotePath(f))
	}
	switch {
	case existing != "" && m.Package.Set && m.Package.V != existing:
		return nil, fmt.Errorf("package %q: the Go files in %s are package %s; make them agree or drop package: to use %s",
			m.Package.V, quotePath(dir), existing, existing)
	case existing != "":
		o.name = existing
	case m.Package.Set:
		o.name = m.Package.V
	default:
		o.name = strings.NewReplacer("-", "_", ".", "_").Replace(filepath.Base(abs))
		if !token.IsIdentifier(o.name) || token.IsKeyword(o.name) {
			return nil, fmt.Errorf("cannot name the package of %s after its directory; set package: in the manifest", quotePath(out))
		}
	}
	return o, nil
}

// buildContext is the go/build context that selects files as the go
// command with the environment env and the build tags would: go/build's
// default takes GOOS, GOARCH and CGO_ENABLED from the process instead.
// Without tags, those of GOFLAGS's -tags apply, as they do to the go
// command, whose command line's -tags would override them.
func buildContext(env, tags []string) build.Context {
	bctx := build.Default
	bctx.BuildTags = tags
	if len(tags) == 0 {
		bctx.BuildTags = goFlagsTags(gocmd.Lookup(env, "GOFLAGS"))
	}
	if v := gocmd.Lookup(env, "GOOS"); v != "" {
		bctx.GOOS = v
	}
	if v := gocmd.Lookup(env, "GOARCH"); v != "" {
		bctx.GOARCH = v
	}
	if v := gocmd.Lookup(env, "CGO_ENABLED"); v != "" {
		bctx.CgoEnabled = v == "1"
	}
	// A FIFO or a device named like a Go file is passed over, not read.
	bctx.OpenFile = func(path string) (io.ReadCloser, error) { return readfile.Open(path) }
	return bctx
}

// goFlagsTags returns the build tags a GOFLAGS value sets, the last
// -tags of it winning, as the go command reads it.
func goFlagsTags(goFlags string) []string {
	var tags []string
	for _, f := range strings.Fields(goFlags) {
		if name, value, ok := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(f, "-"), "-"), "="); ok && name == "tags" {
			tags = strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' })
		}
	}
	return tags
}

// buildContext is buildContext of o's environment and tags, with what go
// env said of GOOS, GOARCH and CGO_ENABLED, when kvgen asked it, where the
// environment does not say: a go env file may set them.
func (o Options) buildContext() build.Context {
	env := o.Env
	if len(o.goEnv) == len(warmGoEnv) { // asked (withDefaults)
		var asked []string
		for _, k := range []string{"GOOS", "GOARCH", "CGO_ENABLED"} {
			asked = append(asked, k+"="+o.goEnv[slices.Index(warmGoEnv, k)])
		}
		env = append(asked, env...) // the environment's own win
	}
	return buildContext(env, o.Tags)
}

// readPackage returns the package name of the non-test Go files in dir
// other than skip that the build tags select, and adds their top-level
// names to declared; declaredIn says which file declares each.
//
// Files are read in dir and named in shownDir.
func readPackage(dir, shownDir, skip string, bctx build.Context, declared map[string]bool) (string, map[string]string, error) {
	files, _, err := gofiles.In(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	name := ""
	declaredIn := map[string]string{}
	fset := token.NewFileSet()
	for _, n := range files {
		if n == skip {
			continue
		}
		if ok, err := bctx.MatchFile(dir, n); err != nil || !ok {
			continue
		}
		src, err := readfile.Read(filepath.Join(dir, n), readfile.Max)
		if err != nil {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), src, parser.SkipObjectResolution)
		if err != nil {
			continue // the compiler will say what is wrong with it
		}
		if name == "" && f.Name.Name != "documentation" {
			name = f.Name.Name
		}
		for _, id := range topLevelNames(f) {
			declared[id] = true
			if _, ok := declaredIn[id]; !ok {
				declaredIn[id] = filepath.Join(shownDir, n)
			}
		}
	}
	return name, declaredIn, nil
}

func topLevelNames(f *ast.File) []string {
	var names []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names = append(names, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					names = append(names, spec.Name.Name)
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// overlay stands in for an existing registry file while the connectors'
// packages load. A connector that imports the package the registry goes
// into would otherwise fail to load through the old file's import of it,
// and kvgen could never write a file without the cycle.
func (o *outputPackage) overlay(abs string) map[string][]byte {
	if o == nil {
		return nil
	}
	if _, err := os.Stat(abs); err != nil {
		return nil
	}
	return map[string][]byte{abs: []byte("package " + o.name + "\n")}
}

// defaultLoadDir is where the go command loads from when Options.Dir is
// unset: the directory of out, the output file, whose module compiles the
// registry (its nearest existing parent, since generate may create it);
// the manifest's directory when out is in no module, which checkOutput
// then reports as outside the manifest's.
func defaultLoadDir(opts Options, out string) string {
	d := filepath.Dir(out)
	for {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			break
		}
		if filepath.Dir(d) == d {
			break
		}
		d = filepath.Dir(d)
	}
	if gocmd.ModuleRoot(d) == "" {
		return opts.abs(filepath.Dir(opts.Manifest))
	}
	return d
}

// outputFile is the registry file a run generates.
type outputFile struct {
	// path is the file as messages show it (Result.Path), abs its
	// absolute form, and given Options.Output when it named the file.
	path, abs, given string
	// pkg is the package the file goes into; nil when its directory
	// could not be read, a problem reported.
	pkg *outputPackage
	// root is the directory of the module that compiles the file, or ""
	// for none; resolved is abs with its symbolic links resolved, once
	// checkWritable has found that kvgen may write it.
	root, resolved string
}

// placeOutput returns the file to write for m and the package it goes
// into as that package is now.
func placeOutput(errs *diag.List, opts Options, m *manifest.Manifest) *outputFile {
	out := &outputFile{path: opts.Output, given: opts.Output}
	if out.path == "" {
		out.path = filepath.Join(filepath.Dir(opts.Manifest), m.Output.V)
	}
	out.abs = opts.abs(out.path)
	pkg, err := readOutputPackage(m, out.path, out.abs, opts.buildContext())
	if err != nil {
		errs.Append(m.OutputPos(), err)
	}
	out.pkg = pkg
	return out
}

// checkWritable checks that kvgen may write the file (see Write). A
// problem with the file Options.Output names stops the run, being the
// caller's and not the manifest's; one with the manifest's output is in
// errs.
func (o *outputFile) checkWritable(errs *diag.List, m *manifest.Manifest) error {
	if err := o.writable(m); err != nil {
		if o.given != "" {
			return err
		}
		errs.Append(m.OutputPos(), err)
	}
	return nil
}

// writable checks that kvgen may write the file, m's output or the one
// Options.Output named, and sets o.resolved.
func (o *outputFile) writable(m *manifest.Manifest) error {
	if o.given != "" && manifest.CheckFileName("", filepath.ToSlash(o.given)) != "" {
		return &OutputError{Path: o.given}
	}
	if o.root == "" {
		return outputFileError(m, o.given, errors.New("the manifest is not inside a Go module (no go.mod in its directory or above); kvgen generates into a module"))
	}
	resolved, err := resolveWritable(o.path, o.abs, o.root)
	if err != nil {
		return outputFileError(m, o.given, err)
	}
	o.resolved = resolved
	return nil
}
