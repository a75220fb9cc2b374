// Package load lists the packages of a manifest's entries, the registry
// package and the contract's with one go list run, and says why each one
// that did not load did not: the compiler's errors, the module that lacks
// it, the module version the module cache lacks. It reads no export data
// and edits no file: checking the packages is the generator's, and
// linking the modules they come from is package link's.
package load

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/gofiles"
	"github.com/kvgen/kvgen/internal/problemcap"
	"github.com/kvgen/kvgen/internal/readfile"
	"github.com/kvgen/kvgen/internal/suggest"
)

// RegistryPath is the import path of the runtime package that generated
// code imports.
const RegistryPath = "github.com/kvgen/kvgen/registry"

// ErrNoKVGen says that the main module does not require kvgen, so that
// the registry package the generated file imports cannot be loaded; the
// command says how to add it.
var ErrNoKVGen = errors.New("the main module does not require kvgen, whose registry package the generated file imports")

// Package is an entry's package as the go command listed it.
type Package struct {
	// Pkg is the package, nil when the go command did not list it.
	Pkg *packages.Package
	// Err is why it cannot be checked: it did not load, or does not
	// compile.
	Err error
	// Src is its Go files, parsed when first needed.
	Src *SourceFiles
}

// SourceFiles is a package's Go files parsed with their comments, for
// constructor markers and doc comments: each read and parsed at most once,
// however many entries and steps read it, and only once a reader may need
// it. It is apart from the package's types, which the generator reads
// from export data.
type SourceFiles struct {
	names []string
	mu    sync.Mutex
	fset  *token.FileSet
	files []sourceFile // by name, once read
}

// sourceFile is one of a package's files: its source, and its syntax once
// parsed.
type sourceFile struct {
	src      []byte
	readErr  error
	syntax   *ast.File
	parseErr error
	parsed   bool
}

// NewSourceFiles returns the source files of p, which may be nil.
func NewSourceFiles(p *packages.Package) *SourceFiles {
	s := &SourceFiles{}
	if p != nil {
		s.names = p.GoFiles
	}
	return s
}

// Holding returns, parsed, the files whose source holds one of words (with
// none, every file), and the first failure among them or among the files
// that could not be read. A file that does not spell out a name or a
// marker cannot declare or mark it, so a reader looking for one parses a
// file or two of a package, not all of it: of the KV contract's 19 files,
// two hold a marker, and parsing all 19 was about half of what generating
// a registry of three entries did besides its go list.
func (s *SourceFiles) Holding(words ...string) ([]*ast.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.fset = token.NewFileSet()
		s.files = make([]sourceFile, len(s.names))
		for i, name := range s.names {
			s.files[i].src, s.files[i].readErr = readfile.Read(name, readfile.Max)
		}
	}
	var out []*ast.File
	var first error
	for i := range s.files {
		f := &s.files[i]
		switch {
		case f.readErr != nil:
			first = cmp.Or(first, f.readErr) // it may hold what is looked for
			continue
		case len(words) > 0 && !slices.ContainsFunc(words, func(w string) bool { return bytes.Contains(f.src, []byte(w)) }):
			continue
		case !f.parsed:
			f.syntax, f.parseErr = parser.ParseFile(s.fset, s.names[i], f.src, parser.ParseComments|parser.SkipObjectResolution)
			f.parsed = true
		}
		if f.parseErr != nil {
			first = cmp.Or(first, f.parseErr)
			continue
		}
		out = append(out, f.syntax)
	}
	return out, first
}

// loaderDir is the directory, inside the directory packages are loaded
// from, of the package that stands for the registry while loading: it
// exists only in the go command's overlay. The leading underscore keeps
// it out of ./... patterns, should a user's tool ever see it.
const loaderDir = "_kvgenload"

// maxPatternBytes is how long a list of patterns go/packages passes to one
// go list run: past it (its limit is 32767 less 16384 for the environment,
// counting a separator per pattern), it splits the load into several
// concurrent go list runs, each repeating the module graph, the standard
// library's packages and a version probe.
const maxPatternBytes = 32767 - 16384

// Load lists every package with one go list run (List), and returns what
// it said of paths, the registry package and the contract's.
//
// The connectors are listed by their import paths while those fit one go
// list run (up to some 280 real paths). A longer list is given to the go
// command as one package that exists only in an overlay and imports every
// connector, listed with its dependencies: that lists some 200 more
// packages (about 15% more work at N=10, which is why short lists go as
// they are) but is one run at any N.
func Load(ctx context.Context, lc Config, overlay map[string][]byte, paths []string) (*Listing, error) {
	listed, err := List(ctx, lc, overlay, paths)
	if err != nil {
		return nil, err
	}
	return listed.Listing(ctx, lc, paths)
}

// Listed is what one go list run listed: its roots, and every package by
// import path.
type Listed struct {
	roots  []*packages.Package
	byPath map[string]*packages.Package
}

// GoMod is the main module's go.mod as the go command used it, "" when it
// named none.
func (ps *Listed) GoMod() string {
	for _, r := range ps.roots {
		if r.Name == "kvgenload" && r.Module != nil {
			return r.Module.GoMod
		}
	}
	return ""
}

// Listing is what the go list run said of paths, which it listed with lc,
// of the registry package and of lc's contract package. To say why a
// package did not build, it may run the go command again.
func (ps *Listed) Listing(ctx context.Context, lc Config, paths []string) (*Listing, error) {
	return newListing(ctx, lc, ps.roots, ps.byPath, paths)
}

// listRuns counts go list runs (List), and depsRuns those of them that
// listed every dependency as well.
var listRuns, depsRuns atomic.Int64

// ListRuns is how many go list runs have listed packages so far, in this
// process: tests count them.
func ListRuns() int64 { return listRuns.Load() }

// DepsRuns is how many of those listed every dependency as well.
func DepsRuns() int64 { return depsRuns.Load() }

func newListing(ctx context.Context, lc Config, roots []*packages.Package, byPath map[string]*packages.Package, paths []string) (*Listing, error) {
	reg, err := listedRegistry(ctx, lc, byPath[RegistryPath], paths)
	if err != nil {
		return nil, err
	}
	out := &Listing{RegistryPkg: reg, Packages: make(map[string]*Package, len(paths)), Deps: lc.Deps}
	if lc.ContractPath != "" {
		out.ContractPkg = byPath[lc.ContractPath]
		if c := out.ContractPkg; c != nil && c.Module == nil && len(c.Errors) > 0 {
			// No module provides it; ExplainMissing says why, as it
			// does for an entry's package.
			out.contract = &Package{Pkg: c}
			out.Missing = append(out.Missing, out.contract)
		}
	}
	out.GoMod = (&Listed{roots: roots}).GoMod()
	var noExport []*Package
	for _, path := range paths {
		if _, dup := out.Packages[path]; dup {
			continue
		}
		lp := &Package{Pkg: byPath[path], Src: NewSourceFiles(byPath[path])}
		out.Packages[path] = lp
		switch {
		case lp.Pkg == nil:
			lp.Err = fmt.Errorf("package %s was not loaded%s", path, rootErrors(roots))
		case lp.Pkg.Module == nil && len(lp.Pkg.Errors) > 0:
			// No module provides it; explainMissing says why.
			out.Missing = append(out.Missing, lp)
		case len(lp.Pkg.Errors) > 0:
			lp.Err = packageErrors(lp.Pkg, lc.Dir, lc.WorkDir)
		case lp.Pkg.ExportFile == "":
			noExport = append(noExport, lp)
		}
	}
	if len(noExport) > 0 {
		// A package that failed to build for want of a dependency (one
		// that could not be downloaded, say) comes without export data
		// and without errors: go/packages drops its dependencies' errors.
		// The go command says what went wrong when asked without -e.
		args := []string{"-export"}
		for _, lp := range noExport {
			args = append(args, lp.Pkg.PkgPath)
		}
		why := goListError(ctx, lc, args...)
		deps := depsErrors(ctx, lc, args[1:])
		for _, lp := range noExport {
			lp.Err = fmt.Errorf("package %s does not build: %s", lp.Pkg.PkgPath, why)
			if ce := compilerOutput(deps[lp.Pkg.PkgPath], lc.Dir, lc.WorkDir); ce != nil {
				lp.Err = ce // the compiler's errors in what it imports
			}
		}
	}
	return out, nil
}

// List runs the one go list: the registry package, the contract's, and
// the connectors' paths, by name or, past maxPatternBytes, through the
// loader package.
func List(ctx context.Context, lc Config, overlay map[string][]byte, paths []string) (*Listed, error) {
	// The loader package lives in the main module, so the go command's
	// report of it names the main module's go.mod: no go env run needed.
	ov := make(map[string][]byte, len(overlay)+1)
	maps.Copy(ov, overlay)
	loader := filepath.Join(lc.Dir, loaderDir, "load.go")
	// The contract's package is listed with the connectors, and so costs
	// no go list run of its own.
	wanted := []string{RegistryPath}
	if lc.ContractPath != "" && lc.ContractPath != RegistryPath {
		wanted = append(wanted, lc.ContractPath)
	}
	patterns := append(append([]string{"./" + loaderDir}, wanted...), paths...)
	mode := packages.NeedName | packages.NeedFiles | packages.NeedModule | packages.NeedExportFile
	limit := maxPatternBytes
	if lc.LoaderAbove > 0 {
		limit = lc.LoaderAbove
	}
	if patternBytes(patterns) <= limit {
		ov[loader] = loaderSource(nil)
		if lc.Deps {
			mode |= packages.NeedImports | packages.NeedDeps
		}
	} else {
		ov[loader] = loaderSource(append(wanted[1:], paths...))
		patterns = patterns[:1]
		mode |= packages.NeedImports | packages.NeedDeps
	}
	cfg := &packages.Config{
		Context:    ctx,
		Dir:        lc.Dir,
		Mode:       mode,
		BuildFlags: lc.BuildFlags(),
		Env:        gocmd.ForListing(lc.Env()),
		Overlay:    ov,
	}
	if err := gocmd.CheckModuleFiles(cfg.Dir, cfg.Env); err != nil {
		return nil, err
	}
	listRuns.Add(1)
	if mode&packages.NeedDeps != 0 {
		depsRuns.Add(1)
	}
	roots, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("loading packages: %s", gocmd.HideModFile(err.Error(), lc.Dir, cfg.BuildFlags))
	}
	byPath := map[string]*packages.Package{}
	packages.Visit(roots, func(p *packages.Package) bool {
		if _, seen := byPath[p.PkgPath]; seen {
			return false
		}
		byPath[p.PkgPath] = p
		// The scratch go.mod of a link is not named: it is gone once
		// kvgen stops.
		for i := range p.Errors {
			p.Errors[i].Msg = gocmd.HideModFile(p.Errors[i].Msg, lc.Dir, cfg.BuildFlags)
		}
		return true
	}, nil)
	return &Listed{roots: roots, byPath: byPath}, nil
}

// listedRegistry returns reg, the registry package as listed, or why it
// could not be loaded: without it nothing can be checked. paths are the
// connectors' packages, listed with it.
func listedRegistry(ctx context.Context, lc Config, reg *packages.Package, paths []string) (*packages.Package, error) {
	if reg != nil && reg.ExportFile != "" {
		return reg, nil
	}
	msg := "cannot load " + RegistryPath
	switch {
	case reg != nil && reg.Module == nil && len(reg.Errors) > 0:
		// No module provides it: the main module does not require
		// kvgen.
		return nil, fmt.Errorf("%s: %w", msg, ErrNoKVGen)
	case reg != nil && len(reg.Errors) > 0:
		msg += ": " + reg.Errors[0].Msg
	default:
		// go/packages drops the go command's complaint when go list
		// fails as a whole (say, go.mod needs updating, or a module's
		// content is not what go.sum says); ask again, of every package
		// that one command line holds, since any may be the cause.
		var args []string
		for _, p := range append([]string{RegistryPath, lc.ContractPath}, paths...) {
			if p == "" || slices.Contains(args, p) {
				continue
			}
			if patternBytes(args)+len(p)+1 > maxPatternBytes {
				break
			}
			args = append(args, p)
		}
		msg = "cannot load packages: " + goListError(ctx, lc, args...)
	}
	return nil, errors.New(msg)
}

// Listing is what the go command said of the connectors' packages and of
// the registry package, before any export data is read.
type Listing struct {
	// RegistryPkg is the registry package, as listed.
	RegistryPkg *packages.Package
	// ContractPkg is the package of the type a manifest's factory:
	// names, or nil.
	ContractPkg *packages.Package
	Packages    map[string]*Package // by import path
	// GoMod is the main module's go.mod as the go command used it.
	GoMod string
	// Deps is whether every package the listed ones import, directly or
	// not, was listed too (Config.Deps).
	Deps bool
	// Missing are the packages no module provides; explained, whether
	// their errors say why.
	Missing   []*Package
	explained bool
	// contract is ContractPkg among Missing, or nil.
	contract *Package
}

// ContractMissing says why no module provides the contract's package,
// once ExplainMissing has: which module of go.mod lacks it, and what is
// nearest. It is nil when a module provides the package, or when no
// module of go.mod could: the go command's own words say that best.
func (l *Listing) ContractMissing() error {
	if l.contract == nil || errors.Is(l.contract.Err, errNoModule) {
		return nil
	}
	return l.contract.Err
}

// ExplainMissing says why no module provides each missing package.
// mods are the modules go.mod requires, the main module first.
func (l *Listing) ExplainMissing(ctx context.Context, lc Config, mods []string) {
	if len(l.Missing) > 0 && !l.explained {
		explainMissing(ctx, lc, mods, l.Missing)
		l.explained = true
	}
}

// patternBytes is how go/packages counts the length of patterns.
func patternBytes(patterns []string) int {
	n := 0
	for _, p := range patterns {
		n += len(p) + 1
	}
	return n
}

// loaderSource is the overlay package that imports the registry and the
// given connectors. Import paths were checked by the manifest; they are quoted all
// the same.
func loaderSource(paths []string) []byte {
	var b strings.Builder
	b.WriteString("package kvgenload\n\nimport (\n\t_ " + strconv.Quote(RegistryPath) + "\n")
	for _, p := range paths {
		b.WriteString("\t_ " + strconv.Quote(p) + "\n")
	}
	b.WriteString(")\n")
	return []byte(b.String())
}

// rootErrors is what the go command said about the loader package, for a
// connector package it did not list at all.
func rootErrors(roots []*packages.Package) string {
	var msgs []string
	for _, r := range roots {
		if r.Name != "kvgenload" {
			continue
		}
		for _, e := range r.Errors {
			msgs = append(msgs, FoldLines(e.Msg))
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	return ": " + strings.Join(msgs, "; ")
}

// depsErrors returns, by import path, the errors of the packages that
// each of paths imports, as go list -e reports them for each: one go
// command run's stderr mixes every package's.
func depsErrors(ctx context.Context, lc Config, paths []string) map[string]string {
	args := append(append([]string{"list", "-e", "-export", "-json=ImportPath,DepsErrors"}, lc.BuildFlags()...), paths...)
	out, _, err := gocmd.Run(ctx, lc.Dir, lc.Env(), args...)
	errs := map[string]string{}
	if err != nil {
		return errs
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			DepsErrors []struct{ Err string }
		}
		if dec.Decode(&p) != nil {
			return errs
		}
		var text strings.Builder
		for _, e := range p.DepsErrors {
			text.WriteString(e.Err + "\n")
		}
		errs[p.ImportPath] = text.String()
	}
}

// goListError returns what the go command says when it lists args.
func goListError(ctx context.Context, lc Config, args ...string) string {
	// The go command names files relative to where it runs: asked from
	// the user's directory, when that is in the same module, it names
	// them as the user reaches them (go.mod, not ../go.mod).
	dir := lc.Dir
	if lc.WorkDir != "" && gocmd.ModuleRoot(lc.WorkDir) == gocmd.ModuleRoot(lc.Dir) {
		dir = lc.WorkDir
	}
	_, stderr, err := gocmd.Run(ctx, dir, lc.Env(), append(append([]string{"list"}, lc.BuildFlags()...), args...)...)
	switch {
	case err == nil:
		return "asked again, the go command finds no error; run kvgen again"
	case len(bytes.TrimSpace(stderr)) == 0:
		return err.Error()
	}
	return FoldLines(gocmd.HideModFile(string(bytes.TrimSpace(stderr)), dir, lc.BuildFlags()))
}

// packageErrors condenses a package's errors into one line, keeping the
// go command's own words. When they are the compiler's, it returns a
// *CompileError: the go command ran in dir and named the package's files
// relative to it, and the error shows them as the user's working
// directory, workDir, reaches them.
func packageErrors(p *packages.Package, dir, workDir string) error {
	if ce := compileErrors(p, dir, workDir); ce != nil {
		return ce
	}
	var msgs []string
	for i, e := range p.Errors {
		if i == 5 {
			msgs = append(msgs, fmt.Sprintf("(and %d more errors)", len(p.Errors)-i))
			break
		}
		m := e.Msg
		if e.Pos != "" && e.Pos != "-" {
			m = e.Pos + ": " + m
		}
		msgs = append(msgs, FoldLines(m))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// CompileError is what the compiler said of a package that does not
// compile, or of one it imports: its errors, each at its place in the
// package's files where it names one.
type CompileError struct {
	// Pkgs are the packages the errors are in, as the go command's
	// "# package" lines name them.
	Pkgs []string
	// Errs are the compiler's lines, each at its place when it names one.
	Errs []diag.Related
}

// Error is the errors on one line, the first five of them.
func (e *CompileError) Error() string {
	var msgs []string
	for i, r := range e.Errs {
		if i == 5 {
			msgs = append(msgs, fmt.Sprintf("(and %d more errors)", len(e.Errs)-i))
			break
		}
		msgs = append(msgs, (&diag.Error{Pos: r.Pos, Msg: r.Msg}).Error())
	}
	return strings.Join(msgs, "; ")
}

// compilerLine is a line of the compiler's: file:line[:col]: message. The
// file is matched lazily, so that a Windows drive's colon stays in it.
var compilerLine = regexp.MustCompile(`^(.+?):([0-9]+)(?::([0-9]+))?: (.*)$`)

// compileErrors returns the compiler's errors among p's, or nil if p has
// none: the go command reports them as one error, "# package" and then a
// line each.
func compileErrors(p *packages.Package, dir, workDir string) *CompileError {
	var text strings.Builder
	for _, e := range p.Errors {
		if e.Pos != "" || !strings.HasPrefix(e.Msg, "# ") {
			return nil
		}
		text.WriteString(e.Msg + "\n")
	}
	return compilerOutput(text.String(), dir, workDir)
}

// compilerOutput reads the go command's report of packages that do not
// compile, from a go command run in dir: "# package", then the compiler's
// lines. A file that exists from dir is shown from workDir; the other
// lines (too many errors, a note) are kept as they are, without a place.
// It returns nil if no line names a place, or if the text says anything
// before its first package but what it downloaded: that is no compiler's.
func compilerOutput(text, dir, workDir string) *CompileError {
	var ce CompileError
	placed, more := false, 0
	show := diag.ShortPath(workDir)
	for raw := range strings.Lines(text) {
		l := strings.TrimSpace(raw)
		switch m := compilerLine.FindStringSubmatch(l); {
		case strings.HasPrefix(l, "# "):
			ce.Pkgs = append(ce.Pkgs, strings.TrimPrefix(l, "# "))
		case len(ce.Pkgs) == 0 && l != "" && !strings.HasPrefix(l, "go: downloading "):
			return nil
		case len(ce.Pkgs) == 0 || l == "":
		case len(ce.Errs) == problemcap.Max:
			more++
		case len(ce.Errs) > 0 && strings.TrimLeft(raw, " \t") != raw:
			// An indented line goes on the error before it (have
			// and want of a mismatched type).
			ce.Errs[len(ce.Errs)-1].Msg += "; " + l
		case m == nil || strings.HasPrefix(l, "kvgen"):
			// A line of no place stays as it is; one that reads as
			// kvgen's own (a //line directive names any file) says
			// whose it is, as the go command's lines do.
			if strings.HasPrefix(l, "kvgen") {
				l = "go: " + l
			}
			ce.Errs = append(ce.Errs, diag.Related{Msg: l})
		default:
			file, abs := m[1], m[1]
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(dir, abs)
			}
			if regularFile(abs) {
				file = show(abs)
			}
			line, _ := strconv.Atoi(m[2])
			col, _ := strconv.Atoi(m[3])
			ce.Errs = append(ce.Errs, diag.Related{Pos: token.Position{Filename: file, Line: line, Column: col}, Msg: m[4]})
			placed = true
		}
	}
	if !placed {
		return nil
	}
	if more > 0 {
		ce.Errs = append(ce.Errs, diag.Related{Msg: fmt.Sprintf("(and %d more lines; go build shows them)", more)})
	}
	return &ce
}

// regularFile reports whether path names a regular file.
func regularFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// FoldLines folds the go command's multi-line output, dropping its
// "# package" headers, so that each error stays on one line: a line that
// ends in a colon goes on with the next ("errors parsing go.mod:
// go.mod:9: ..."), others are separated by semicolons.
func FoldLines(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "# ") {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// Config says how the go command lists the packages.
type Config struct {
	// ContractPath is the import path of the package of the type a
	// manifest's factory: names, or "".
	ContractPath string
	// Dir is the directory the go command runs in; it decides the main
	// module.
	Dir string
	// WorkDir is the command's working directory, which messages show
	// paths relative to; Environ is the go command's environment.
	WorkDir string
	Environ []string
	// Flags are the build flags: -trimpath and -tags as the build uses
	// them.
	Flags []string
	// LoaderAbove, when set, replaces maxPatternBytes, so that tests can
	// load short lists through the loader package.
	LoaderAbove int
	// Deps lists, with the packages, every package they import, directly
	// or not (as the loader package's listing always does): a run that
	// may leave a warm record needs to know where each comes from.
	Deps bool
	// ModFile is a go.mod to use instead of the main module's.
	ModFile string
	// FromCache loads with -mod=readonly, from the module cache, when the
	// main module's vendor directory lacks what go.mod requires.
	FromCache bool
	// Tmp is the go command's GOTMPDIR: a go command stopped by a signal
	// leaves its work directory there, and the caller removes Tmp.
	Tmp string
}

// Env is the go command's environment for loading.
func (lc Config) Env() []string {
	env := lc.Environ
	if lc.ModFile != "" {
		env = gocmd.WithoutWorkspace(env)
	}
	if lc.Tmp != "" {
		env = gocmd.WithTempDir(env, lc.Tmp)
	}
	return env
}

// BuildFlags are the go command flags that loading needs.
func (lc Config) BuildFlags() []string {
	flags := lc.Flags
	if lc.ModFile != "" {
		flags = append(slices.Clip(flags), "-modfile="+lc.ModFile)
	}
	if lc.FromCache {
		flags = append(slices.Clip(flags), "-mod=readonly")
	}
	return flags
}

// errNoModule is the error of a package that no module of go.mod holds.
var errNoModule = errors.New("no module in go.mod provides it; give the entry version: (the module's version) or replace: (the directory of the module on this machine), and go generate adds the module to go.mod")

// explainMissing sets the error of each package that the go command found
// in no module (its Module is nil). It goes by go.mod's module paths, not
// by the go command's wording: when no module of go.mod could hold the
// import path, the module is missing; when one could, that module lacks
// the package, and the error says whether its directory is there without
// Go files, or which of the module's packages is nearest.
//
// mods are the modules go.mod requires, the main module first.
func explainMissing(ctx context.Context, lc Config, mods []string, missing []*Package) {
	mainPath := mods[0]
	byModule := map[string][]*Package{}
	for _, lp := range missing {
		mod := ModuleOf(lp.Pkg.PkgPath, mods)
		switch {
		case mod == "" && Std(lp.Pkg.PkgPath):
			lp.Err = packageErrors(lp.Pkg, lc.Dir, lc.WorkDir) // a standard library path: the go command says it is not in std
			continue
		case mod == "":
			lp.Err = errNoModule
			continue
		}
		byModule[mod] = append(byModule[mod], lp)
	}
	if len(byModule) == 0 {
		return
	}
	dirs := moduleDirs(ctx, lc, byModule)
	rel := diag.RelativeTo(lc.WorkDir)
	for mod, lps := range byModule {
		for _, lp := range lps {
			lp.Err = missingInModule(lp.Pkg.PkgPath, mod, mod == mainPath, dirs[mod], rel)
			if lp.Err == nil {
				lp.Err = packageErrors(lp.Pkg, lc.Dir, lc.WorkDir) // keep the go command's words
			}
		}
	}
}

// moduleDirs asks the go command where each module's files are.
func moduleDirs(ctx context.Context, lc Config, mods map[string][]*Package) map[string]string {
	args := append([]string{"list", "-m", "-e", "-json"}, lc.BuildFlags()...)
	for m := range mods {
		args = append(args, m)
	}
	dirs := map[string]string{}
	out, _, err := gocmd.Run(ctx, lc.Dir, lc.Env(), args...)
	if err != nil {
		return dirs
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m struct{ Path, Dir string }
		if err := dec.Decode(&m); err != nil {
			if err != io.EOF {
				return map[string]string{}
			}
			return dirs
		}
		dirs[m.Path] = m.Dir
	}
}

// missingInModule explains why module mod, whose files are in dir, does
// not provide the package importPath; nil when it cannot tell.
func missingInModule(importPath, mod string, isMain bool, dir string, rel func(string) string) error {
	if dir == "" {
		return nil
	}
	which := "module " + mod
	if isMain {
		which = "the main module, " + mod + ","
	}
	sub := strings.TrimPrefix(strings.TrimPrefix(importPath, mod), "/")
	pkgDir := filepath.Join(dir, filepath.FromSlash(sub))
	if fi, err := os.Stat(pkgDir); err == nil && fi.IsDir() {
		src, tests, _ := gofiles.In(pkgDir)
		// The nearest go.mod above the package is its module's: one
		// below dir is a module nested in mod.
		switch nested := gocmd.ModuleRoot(pkgDir); {
		case strings.HasPrefix(nested, dir+string(filepath.Separator)):
			// The go command would say to go get it, which asks a
			// module proxy for a module that is only here.
			return fmt.Errorf("directory %s is in a module of its own (%s), which go.mod does not require; give the entry replace: with that module's directory, relative to the manifest", rel(pkgDir), rel(filepath.Join(nested, "go.mod")))
		case len(src) == 0 && len(tests) > 0:
			return fmt.Errorf("directory %s has only test files; a connector's package needs non-test Go files", rel(pkgDir))
		case len(src) == 0:
			return fmt.Errorf("directory %s has no Go files", rel(pkgDir))
		}
		return nil
	}
	e := &NotInModuleError{Module: mod, Msg: fmt.Sprintf("%s has no such package", which)}
	if near := suggest.Nearest(sub, packagesIn(dir), 1); len(near) > 0 {
		e.Msg += fmt.Sprintf("; did you mean %s?", path.Join(mod, near[0]))
	} else {
		// Not a typo of one of its packages: a module nested in it may
		// have the package, which only the main module could not.
		e.Nested = !isMain
	}
	return e
}

// NotInModuleError says that a module go.mod requires lacks a package
// under its path; Nested, that a module nested in it may provide it.
type NotInModuleError struct {
	Module, Msg string
	Nested      bool
}

func (e *NotInModuleError) Error() string { return e.Msg }

// packagesIn lists the package directories of the module rooted at root,
// as slash-separated paths relative to it, skipping what the go command
// skips: testdata, vendor, names starting with . or _, and nested modules.
func packagesIn(root string) []string {
	var pkgs []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if p != root {
			n := d.Name()
			if n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		if src, _, _ := gofiles.In(p); len(src) > 0 {
			rel, _ := filepath.Rel(root, p)
			pkgs = append(pkgs, filepath.ToSlash(rel))
		}
		return nil
	})
	return pkgs
}

// ExplainNotCached words the error of each package whose module the go
// command could not look up, for GOPROXY=off, as the module version the
// module cache lacks. mods are the modules go.mod requires, the main
// module first, and versions their versions.
func (l *Listing) ExplainNotCached(mods []string, versions map[string]string) {
	for path, lp := range l.Packages {
		if lp.Err == nil {
			continue
		}
		mod := ModuleOf(path, mods)
		if nc := notCached(lp.Err.Error(), mod, versions[mod]); nc != nil {
			lp.Err = nc
		}
	}
}
