package main

import (
	"context"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"

	"golang.org/x/mod/module"

	"github.com/kvgen/kvgen/internal/atomicfile"
	"github.com/kvgen/kvgen/templates"
)

// packageName is what `kvgen new` accepts: the name doubles as the Go
// package name, so it must be a plain lower-case identifier.
var packageName = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

func runNew(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "new", "NAME [-module PATH] [-dir DIR] [-replace DIR]")
	modPath := fs.String("module", "", "module path of the new connector (default example.com/NAME)")
	dir := fs.String("dir", "", "directory to create (default ./NAME)")
	replace := fs.String("replace", "", "local kvgen checkout to develop against (adds a replace directive)")
	// Flags may follow the name: kvgen new acme -module example.com/acme.
	positional, code := parseMixed(fs, args)
	if code >= 0 {
		return code
	}
	if len(positional) != 1 {
		e.errorf("new: want one NAME, got %d: %q", len(positional), positional)
		fs.Usage()
		return exitUsage
	}
	name := positional[0]
	if !packageName.MatchString(name) {
		e.errorf("connector name %q: want a lower-case Go package name such as %q", name, strings.ToLower(nonAlnum.ReplaceAllString(name, "")))
		return exitUsage
	}
	if token.IsKeyword(name) {
		e.errorf("connector name %q is a Go keyword and cannot name a package; choose another", name)
		return exitUsage
	}
	if reservedNames[name] {
		e.errorf("connector name %q: the scaffold's code and tests import a package of that name; choose another", name)
		return exitUsage
	}
	if *modPath == "" {
		*modPath = "example.com/" + name
	}
	if err := module.CheckPath(*modPath); err != nil {
		e.errorf("-module: %v", err)
		return exitUsage
	}
	if *dir == "" {
		*dir = name
	}
	if _, err := os.Stat(*dir); err == nil {
		e.errorf("%s already exists; choose another -dir", *dir)
		return exitError
	}
	s := templates.Scaffold{Name: name, Module: *modPath, GoVersion: "1.26.0", KVGenVersion: kvgenVersion()}
	if *replace != "" {
		abs, err := filepath.Abs(*replace)
		if err != nil {
			e.report(err)
			return exitError
		}
		s.Replace = abs
	}
	files, err := templates.RenderScaffold(s)
	if err != nil {
		e.report(err)
		return exitError
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		e.report(err)
		return exitError
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := atomicfile.Write(filepath.Join(*dir, n), files[n]); err != nil {
			e.report(err)
			return exitError
		}
	}
	fmt.Fprintf(e.stdout, "created %s (module %s): %s\n", *dir, *modPath, strings.Join(names, ", "))
	if s.Replace == "" && strings.HasPrefix(s.KVGenVersion, "v0.0.0-") {
		fmt.Fprintf(e.stdout, "this kvgen is a development build: point go.mod at your kvgen checkout with\n\tgo mod edit -replace github.com/kvgen/kvgen=PATH\n")
	}
	fmt.Fprintf(e.stdout, "next: cd %s && go mod tidy && go test ./...\n", *dir)
	return exitOK
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

// reservedNames are the packages the scaffold imports: a connector named
// like one would shadow it.
var reservedNames = map[string]bool{
	"context": true, "errors": true, "fmt": true, "fs": true, "os": true, "filepath": true,
	"testing": true, "registry": true, "conformance": true,
}

// kvgenVersion is the kvgen module version this binary was built from, for
// the scaffold's require line.
func kvgenVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && strings.HasPrefix(info.Main.Version, "v") {
		return info.Main.Version
	}
	return "v0.0.0-00010101000000-000000000000"
}

func runDoc(ctx context.Context, e *env, args []string) int {
	var g genFlags
	fs := newFlags(e, "doc", "[-manifest FILE] [-tags TAGS]")
	g.register(fs, false)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		e.errorf("doc takes no arguments, got %q", fs.Args())
		return exitUsage
	}
	items, contract, err := resolveListed(ctx, g)
	if err != nil {
		g.report(e, err)
		return exitError
	}
	rows := make([]templates.DocRow, len(items))
	for i, l := range items {
		rows[i] = templates.DocRow{
			Name: l.Name, Aliases: strings.Join(l.Aliases, ", "), Roles: strings.Join(l.Roles, ", "),
			Import: l.Import, Constructor: l.Constructor, Module: l.moduleAtVersion(), Summary: l.Doc,
		}
	}
	var factory string
	if !contract.KV() {
		factory = contract.String()
	}
	out, err := templates.RenderDoc(filepath.Base(g.manifest), factory, rows)
	if err != nil {
		e.report(err)
		return exitError
	}
	e.stdout.Write(out)
	return exitOK
}
