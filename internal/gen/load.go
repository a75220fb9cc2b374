package gen

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
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/tools/go/gcexportdata"
	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/gomod"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/problemcap"
	"github.com/kvgen/kvgen/internal/readfile"
)

// RegistryPath is the import path of the runtime package that generated
// code imports.
const RegistryPath = "github.com/kvgen/kvgen/registry"

// kvPath is the import path of the KV connector contract's package, whose
// Factory is DefaultFactory.
const kvPath = RegistryPath + "/kv"

// ErrNoKVGen says that the main module does not require kvgen, so that
// the registry package the generated file imports cannot be loaded; the
// command says how to add it.
var ErrNoKVGen = errors.New("the main module does not require kvgen, whose registry package the generated file imports")

// loadedPackage is a connector package as the check stage sees it.
type loadedPackage struct {
	pkg   *packages.Package
	types *types.Package
	fset  *token.FileSet
	// contract is the contract in the same type universe as types, so
	// that types.Identical and types.Implements can compare them.
	contract *typedContract
	err      error

	// src is its Go files, parsed when first needed.
	src *sourceFiles
}

// sourceFiles is a package's Go files parsed with their comments, for
// constructor markers and doc comments: each read and parsed at most once,
// however many entries and steps read it, and only once a reader may need
// it. It is apart from the package's types, which a Result does not keep.
type sourceFiles struct {
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

// newSourceFiles returns the source files of p, which may be nil.
func newSourceFiles(p *packages.Package) *sourceFiles {
	s := &sourceFiles{}
	if p != nil {
		s.names = p.GoFiles
	}
	return s
}

// holding returns, parsed, the files whose source holds one of words (with
// none, every file), and the first failure among them or among the files
// that could not be read. A file that does not spell out a name or a
// marker cannot declare or mark it, so a reader looking for one parses a
// file or two of a package, not all of it: of the KV contract's 19 files,
// two hold a marker, and parsing all 19 was about half of what generating
// a registry of three entries did besides its go list.
func (s *sourceFiles) holding(words ...string) ([]*ast.File, error) {
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

// load lists every package with one go list run; decode then reads the
// export data of those that need it, in parallel.
//
// The connectors are listed by their import paths while those fit one go
// list run (up to some 280 real paths). A longer list is given to the go
// command as one package that exists only in an overlay and imports every
// connector, listed with its dependencies: that lists some 200 more
// packages (about 15% more work at N=10, which is why short lists go as
// they are) but is one run at any N.
//
// go/packages decodes export data under one lock because its importer shares
// a single type universe. Here each worker keeps its own universe, seeded
// with package registry, so the workers need no lock and the decoding, which
// dominates once go list is done, runs on every core.
func load(ctx context.Context, lc loadConfig, overlay map[string][]byte, paths []string) (*listing, error) {
	roots, byPath, err := listPackages(ctx, lc, overlay, paths)
	if err != nil {
		return nil, err
	}
	return newListing(ctx, lc, roots, byPath, paths)
}

// newListing is what one go list run (listPackages) said of paths, the
// registry package and the contract's.
func newListing(ctx context.Context, lc loadConfig, roots []*packages.Package, byPath map[string]*packages.Package, paths []string) (*listing, error) {
	reg, err := listedRegistry(ctx, lc, byPath[RegistryPath], paths)
	if err != nil {
		return nil, err
	}
	out := &listing{registry: reg, pkgs: make(map[string]*loadedPackage, len(paths)), deps: lc.deps}
	if lc.contractPath != "" {
		out.contractPkg = byPath[lc.contractPath]
	}
	for _, r := range roots {
		if r.Name == "kvgenload" && r.Module != nil {
			out.goMod = r.Module.GoMod
		}
	}
	var noExport []*loadedPackage
	for _, path := range paths {
		if _, dup := out.pkgs[path]; dup {
			continue
		}
		lp := &loadedPackage{pkg: byPath[path], src: newSourceFiles(byPath[path])}
		out.pkgs[path] = lp
		switch {
		case lp.pkg == nil:
			lp.err = fmt.Errorf("package %s was not loaded%s", path, rootErrors(roots))
		case lp.pkg.Module == nil && len(lp.pkg.Errors) > 0:
			// No module provides it; explainMissing says why.
			out.missing = append(out.missing, lp)
		case len(lp.pkg.Errors) > 0:
			lp.err = packageErrors(lp.pkg, lc.dir, lc.workDir)
		case lp.pkg.ExportFile == "":
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
			args = append(args, lp.pkg.PkgPath)
		}
		why := foldLines(goListError(ctx, lc, args...))
		deps := depsErrors(ctx, lc, args[1:])
		for _, lp := range noExport {
			lp.err = fmt.Errorf("package %s does not build: %s", lp.pkg.PkgPath, why)
			if ce := compilerOutput(deps[lp.pkg.PkgPath], lc.dir, lc.workDir); ce != nil {
				lp.err = ce // the compiler's errors in what it imports
			}
		}
	}
	return out, nil
}

// listPackages runs the one go list: the registry package, the contract's,
// and the connectors' paths, by name or, past maxPatternBytes, through the
// loader package. It returns the packages listed as roots, and every
// package listed by import path.
func listPackages(ctx context.Context, lc loadConfig, overlay map[string][]byte, paths []string) ([]*packages.Package, map[string]*packages.Package, error) {
	// The loader package lives in the main module, so the go command's
	// report of it names the main module's go.mod: no go env run needed.
	ov := make(map[string][]byte, len(overlay)+1)
	maps.Copy(ov, overlay)
	loader := filepath.Join(lc.dir, loaderDir, "load.go")
	// The contract's package is listed with the connectors, and so costs
	// no go list run of its own.
	wanted := []string{RegistryPath}
	if lc.contractPath != "" && lc.contractPath != RegistryPath {
		wanted = append(wanted, lc.contractPath)
	}
	patterns := append(append([]string{"./" + loaderDir}, wanted...), paths...)
	mode := packages.NeedName | packages.NeedFiles | packages.NeedModule | packages.NeedExportFile
	limit := maxPatternBytes
	if lc.loaderAbove > 0 {
		limit = lc.loaderAbove
	}
	if patternBytes(patterns) <= limit {
		ov[loader] = loaderSource(nil)
		if lc.deps {
			mode |= packages.NeedImports | packages.NeedDeps
		}
	} else {
		ov[loader] = loaderSource(append(wanted[1:], paths...))
		patterns = patterns[:1]
		mode |= packages.NeedImports | packages.NeedDeps
	}
	cfg := &packages.Config{
		Context:    ctx,
		Dir:        lc.dir,
		Mode:       mode,
		BuildFlags: lc.buildFlags(),
		Env:        lc.env(),
		Overlay:    ov,
	}
	if err := gocmd.CheckModuleFiles(cfg.Dir, cfg.Env); err != nil {
		return nil, nil, err
	}
	listRuns.Add(1)
	roots, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, nil, fmt.Errorf("loading packages: %s", gocmd.HideModFile(err.Error(), lc.dir, cfg.BuildFlags))
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
			p.Errors[i].Msg = gocmd.HideModFile(p.Errors[i].Msg, lc.dir, cfg.BuildFlags)
		}
		return true
	}, nil)
	return roots, byPath, nil
}

// listedRegistry returns reg, the registry package as listed, or why it
// could not be loaded: without it nothing can be checked. paths are the
// connectors' packages, listed with it.
func listedRegistry(ctx context.Context, lc loadConfig, reg *packages.Package, paths []string) (*packages.Package, error) {
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
		for _, p := range append([]string{RegistryPath, lc.contractPath}, paths...) {
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

// listing is what the go command said of the connectors' packages and of
// the registry package, before any export data is read.
type listing struct {
	registry *packages.Package
	// contractPkg is the package of the type a manifest's factory:
	// names, or nil.
	contractPkg *packages.Package
	pkgs        map[string]*loadedPackage // by import path
	// goMod is the main module's go.mod as the go command used it.
	goMod string
	// deps is whether every package the listed ones import, directly or
	// not, was listed too (loadConfig.deps).
	deps bool
	// missing are the packages no module provides; explained, whether
	// their errors say why.
	missing   []*loadedPackage
	explained bool
}

// explainMissing says why no module provides each missing package.
// mods are the modules go.mod requires, the main module first.
func (l *listing) explainMissing(ctx context.Context, lc loadConfig, mods []string) {
	if len(l.missing) > 0 && !l.explained {
		explainMissing(ctx, lc, mods, l.missing)
		l.explained = true
	}
}

// decode reads the export data of the given packages, which loaded
// without errors, and the contract's types with them.
func (l *listing) decode(todo []*loadedPackage, contract *Contract) error {
	// Workers claim packages by index rather than receive them over a
	// channel: a hand-off per package costs a scheduler round trip, about
	// 15% of the decoding time at 400 packages.
	fset := token.NewFileSet()
	workers := min(runtime.GOMAXPROCS(0), len(todo))
	setupErrs := make([]error, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			imports := make(map[string]*types.Package)
			c, err := l.typeContract(fset, imports, contract)
			if err != nil {
				setupErrs[w] = err
				return // the other workers take the packages; load fails anyway
			}
			for {
				i := int(next.Add(1)) - 1
				if i >= len(todo) {
					return
				}
				lp := todo[i]
				lp.types, lp.err = readExport(fset, imports, lp.pkg)
				lp.contract, lp.fset = c, fset
			}
		})
	}
	wg.Wait()
	return errors.Join(setupErrs...)
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
			msgs = append(msgs, foldLines(e.Msg))
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
func depsErrors(ctx context.Context, lc loadConfig, paths []string) map[string]string {
	args := append(append([]string{"list", "-e", "-export", "-json=ImportPath,DepsErrors"}, lc.buildFlags()...), paths...)
	out, _, err := gocmd.Run(ctx, lc.dir, lc.env(), args...)
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
func goListError(ctx context.Context, lc loadConfig, args ...string) string {
	_, stderr, err := gocmd.Run(ctx, lc.dir, lc.env(), append(append([]string{"list"}, lc.buildFlags()...), args...)...)
	switch {
	case err == nil:
		return "asked again, the go command finds no error; run kvgen again"
	case len(bytes.TrimSpace(stderr)) == 0:
		return err.Error()
	}
	return gocmd.HideModFile(string(bytes.TrimSpace(stderr)), lc.dir, lc.buildFlags())
}

// readExport decodes a package's export data into imports.
func readExport(fset *token.FileSet, imports map[string]*types.Package, p *packages.Package) (*types.Package, error) {
	f, err := os.Open(p.ExportFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The go command's -export files are still archives, which only
	// NewReader opens; Read alone will do once they are not.
	//lint:ignore SA1019 go list -export hands archives to this Go
	r, err := gcexportdata.NewReader(f) // it buffers f itself
	if err != nil {
		return nil, fmt.Errorf("reading export data of %s: %w", p.PkgPath, err)
	}
	return gcexportdata.Read(r, fset, imports, p.PkgPath)
}

// typeContract reads the contract's types into a worker's type universe:
// those of one universe cannot be compared with another's.
func (l *listing) typeContract(fset *token.FileSet, imports map[string]*types.Package, c *Contract) (*typedContract, error) {
	pkg, err := readExport(fset, imports, l.contractPkg)
	if err != nil {
		return nil, err
	}
	tc, _, problem := typeContract(pkg, *c)
	if tc == nil {
		return nil, errors.New(problem) // readContract reported it already
	}
	return tc, nil
}

// packageErrors condenses a package's errors into one line, keeping the
// go command's own words. When they are the compiler's, it returns a
// *compileError: the go command ran in dir and named the package's files
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
		msgs = append(msgs, foldLines(m))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// compileError is what the compiler said of a package that does not
// compile, or of one it imports: its errors, each at its place in the
// package's files where it names one.
type compileError struct {
	// pkgs are the packages the errors are in, as the go command's
	// "# package" lines name them.
	pkgs []string
	errs []diag.Related
}

// Error is the errors on one line, the first five of them.
func (e *compileError) Error() string {
	var msgs []string
	for i, r := range e.errs {
		if i == 5 {
			msgs = append(msgs, fmt.Sprintf("(and %d more errors)", len(e.errs)-i))
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
func compileErrors(p *packages.Package, dir, workDir string) *compileError {
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
func compilerOutput(text, dir, workDir string) *compileError {
	var ce compileError
	placed, more := false, 0
	show := shortPath(workDir)
	for raw := range strings.Lines(text) {
		l := strings.TrimSpace(raw)
		switch m := compilerLine.FindStringSubmatch(l); {
		case strings.HasPrefix(l, "# "):
			ce.pkgs = append(ce.pkgs, strings.TrimPrefix(l, "# "))
		case len(ce.pkgs) == 0 && l != "" && !strings.HasPrefix(l, "go: downloading "):
			return nil
		case len(ce.pkgs) == 0 || l == "":
		case len(ce.errs) == problemcap.Max:
			more++
		case len(ce.errs) > 0 && strings.TrimLeft(raw, " \t") != raw:
			// An indented line goes on the error before it (have
			// and want of a mismatched type).
			ce.errs[len(ce.errs)-1].Msg += "; " + l
		case m == nil || strings.HasPrefix(l, "kvgen"):
			// A line of no place stays as it is; one that reads as
			// kvgen's own (a //line directive names any file) says
			// whose it is, as the go command's lines do.
			if strings.HasPrefix(l, "kvgen") {
				l = "go: " + l
			}
			ce.errs = append(ce.errs, diag.Related{Msg: l})
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
			ce.errs = append(ce.errs, diag.Related{Pos: token.Position{Filename: file, Line: line, Column: col}, Msg: m[4]})
			placed = true
		}
	}
	if !placed {
		return nil
	}
	if more > 0 {
		ce.errs = append(ce.errs, diag.Related{Msg: fmt.Sprintf("(and %d more lines; go build shows them)", more)})
	}
	return &ce
}

// regularFile reports whether path names a regular file.
func regularFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// foldLines folds the go command's multi-line output, dropping its
// "# package" headers, so that each error stays on one line.
func foldLines(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "# ") {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// linked is what loadLinked makes: the entries' packages as the go
// command listed them, with the go.mod that links the manifest's modules.
type linked struct {
	*listing
	// importPath is the import path of the package the file goes into,
	// "" if unknown.
	importPath string
	warnings   []*Problem
	// modules is go.mod and go.sum linked with the manifest's modules,
	// when go.mod lacks them; vendor is what vendor/ lacks of the go.mod
	// linked, when the main module builds from it.
	modules *gomod.Update
	vendor  *gomod.VendorError
}

// loadLinked loads the packages of m's entries, and contractPath, the
// package of the type factory: names, with a go.mod that links the
// modules m names: the main module's when it does, else one linked in a
// scratch directory, which it returns in modules. An entry whose version:
// or replace: is wrong is reported in errs and left out.
func loadLinked(ctx context.Context, errs *diag.List, opts Options, m *manifest.Manifest, out *outputFile, contractPath string, deps bool) (*linked, error) {
	loads.Add(1)
	r := &linkRun{ctx: ctx, errs: errs, opts: opts, m: m}
	r.lc = loadConfig{contractPath: contractPath, dir: opts.loadDir(), workDir: opts.WorkDir, environ: opts.Env, flags: opts.BuildFlags(), loaderAbove: opts.loaderAbove, deps: deps}
	var err error
	// What a go command stopped by a signal leaves goes with tmp.
	if r.lc.tmp, err = gocmd.TempDir(opts.Env); err != nil {
		return nil, err
	}
	defer os.RemoveAll(r.lc.tmp)
	// The existing registry file stands aside while loading: it may be
	// what closes an import cycle through a connector that imports the
	// output package, and kvgen could never write a file without it.
	r.overlay = out.pkg.overlay(out.abs)
	r.paths = importPaths(m)
	listed := r.opts.together.listing(ctx, r.opts, r.lc, r.overlay, r.paths)
	if listed == nil {
		listed, err = load(ctx, r.lc, r.overlay, r.paths)
	}
	main, merr := mainModule(ctx, listed, err, r.lc.dir, opts.Env)
	if merr != nil {
		return nil, r.stop(merr)
	}
	r.main, r.lc.goMod = main, main.GoMod
	ld := &linked{importPath: packagePath(main, filepath.Dir(out.abs))}
	plan, perr := gomod.NewPlan(m, main, filepath.Dir(opts.abs(opts.Manifest)))
	errs.Append(outputPos(m), perr)
	if plan == nil {
		return nil, errs.Err()
	}
	r.plan = plan
	ld.warnings = plan.Warnings.Sort()
	if markBad(m, plan) {
		r.paths = importPaths(m)
	}
	r.vendored = main.Vendored(opts.Env)
	nested, notes := r.loadNested(listed, err)
	switch {
	case len(plan.Lacks) > 0:
		listed, err = r.linkLacks(ld)
	case r.vendored:
		listed, err = r.reloadUnvendored(ld, listed, err, nested)
	case err != nil:
		err = r.stop(err)
	}
	if err != nil {
		return nil, err
	}
	r.explain(ld, listed, notes)
	ld.listing = listed
	return ld, nil
}

// linkRun is what the steps of one loadLinked share: its arguments, the
// go command's configuration, which a step may change for the steps after
// it, and the main module and plan the first load found.
type linkRun struct {
	ctx      context.Context
	errs     *diag.List
	opts     Options
	m        *manifest.Manifest
	lc       loadConfig
	overlay  map[string][]byte
	paths    []string
	main     *gomod.Main
	plan     *gomod.Plan
	vendored bool
}

// stop returns err, a failure that stops the run, with the problems found
// so far, the manifest's and the output file's, so that one run reports
// them all.
func (r *linkRun) stop(err error) error {
	if found := r.errs.Err(); found != nil {
		return errors.Join(found, err)
	}
	return err
}

// loadNested returns the packages as the module cache has them, and the
// notes linkNested adds for entries no module go.mod requires provides:
// a vendored module is looked at in the module cache, since vendor/ holds
// only the packages it builds and the go command reads nothing else.
// listed and err are the first load's; nested is listed when vendor/ is
// not in the way.
func (r *linkRun) loadNested(listed *listing, err error) (nested *listing, notes map[string]string) {
	nlc, nested, nerr := r.lc, listed, err
	if r.vendored && (err != nil || len(listed.missing) > 0) {
		nlc.fromCache = true
		nested, nerr = load(r.ctx, nlc, r.overlay, r.paths)
	}
	if nerr == nil && len(nested.missing) > 0 {
		notes = linkNested(r.ctx, nlc, r.opts, r.m, r.main, r.plan, nested)
	}
	return nested, notes
}

// linkLacks links the modules the plan says go.mod lacks in a scratch
// go.mod, which ld.modules then holds, and loads the packages again with
// it; with ReadOnlyModules it fails instead, saying what go.mod lacks.
// Its errors are the run's to return.
func (r *linkRun) linkLacks(ld *linked) (*listing, error) {
	if r.opts.ReadOnlyModules {
		lerr := r.plan.Err()
		if le, ok := lerr.(*gomod.LacksError); ok {
			le.Vendored = r.vendored
		}
		return nil, r.stop(lerr)
	}
	scratch, err := os.MkdirTemp(r.lc.tmp, "mod-")
	if err != nil {
		return nil, err
	}
	// The scratch go.mod is used outside workspace mode: it takes in
	// what go.work gives the main module.
	if err := r.main.UseWorkspace(r.opts.Env); err != nil {
		return nil, r.stop(err)
	}
	if ld.modules, err = r.plan.Link(r.ctx, scratch, r.opts.Env); err != nil {
		return nil, r.stop(err)
	}
	if r.vendored {
		if ld.vendor, err = vendorLacks(r.opts, r.main, ld.modules.GoMod, nil); err != nil {
			return nil, r.stop(err)
		}
	}
	// Load again with the linked go.mod as go build will use it: read
	// only, so that a go.mod still lacking something fails here.
	r.lc.modFile, r.lc.goMod = ld.modules.ModFile, ld.modules.ModFile
	r.lc.fromCache = ld.vendor != nil
	listed, err := load(r.ctx, r.lc, r.overlay, r.paths)
	ld.modules.ModFile = "" // the scratch go.mod goes with this run
	if err != nil {
		return nil, r.stop(err)
	}
	return listed, nil
}

// reloadUnvendored, for a main module that builds from vendor/ and whose
// go.mod lacks nothing, records in ld.vendor what vendor/ lacks; if it
// lacks something, it loads the packages again from the module cache, as
// go build will once go mod vendor ran, since the go command refuses that
// vendor directory. listed and err are the first load's, nested the
// module cache's (loadNested). Its errors are the run's to return.
func (r *linkRun) reloadUnvendored(ld *linked, listed *listing, err error, nested *listing) (*listing, error) {
	var verr error
	if ld.vendor, verr = vendorLacks(r.opts, r.main, nil, unvendored(r.m, listed, nested)); verr != nil {
		return nil, r.stop(verr)
	}
	if ld.vendor != nil {
		// Packages alone go on: check says what to run once it knows
		// whether the registry file imports them.
		if r.opts.ReadOnlyModules && len(ld.vendor.Lacks) > 0 {
			return nil, r.stop(ld.vendor)
		}
		r.lc.fromCache = true
		listed, err = load(r.ctx, r.lc, r.overlay, r.paths)
	}
	if err != nil {
		return nil, r.stop(err)
	}
	return listed, nil
}

// explain completes the errors of the entries' packages that listed
// lacks, by the modules go.mod requires as linked (ld.modules, else the
// main module's): which module should provide each, the notes of
// loadNested, and what the module cache lacks.
func (r *linkRun) explain(ld *linked, listed *listing, notes map[string]string) {
	mods, versions := r.main.Requires(), r.main.Versions()
	if ld.modules != nil {
		mods, versions = ld.modules.Requires(), ld.modules.Versions()
	}
	listed.explainMissing(r.ctx, r.lc, mods)
	for path, note := range notes {
		var nim *notInModuleError
		if lp := listed.pkgs[path]; lp != nil && errors.As(lp.err, &nim) && !strings.HasSuffix(nim.msg, note) {
			nim.msg += note
		}
	}
	listed.explainNotCached(mods, versions)
}

// linkNested adds to the plan, for each entry whose package a module
// go.mod requires lacks, the module nested in that one which provides it,
// as go get would find it: at the entry's version:, else the latest. An
// entry that no nested module provides keeps its error, which its note
// (by import path) completes: none has it, or none could be looked up.
func linkNested(ctx context.Context, lc loadConfig, opts Options, m *manifest.Manifest, main *gomod.Main, plan *gomod.Plan, listed *listing) (notes map[string]string) {
	listed.explainMissing(ctx, lc, main.Requires())
	notes = map[string]string{}
	for i := range m.Entries {
		c := &m.Entries[i]
		lp := listed.pkgs[c.Import.V]
		var nim *notInModuleError
		if c.Invalid || plan.Bad[i] || c.Replace.Set || lp == nil || !errors.As(lp.err, &nim) || !nim.nested {
			continue
		}
		pos := c.Import.Pos
		if c.Version.Set {
			pos = c.Version.Pos
		}
		mod, version, err := gomod.Nested(ctx, main.Dir, opts.Env, c.Import.V, nim.module, c.Version.V)
		switch {
		case err != nil:
			notes[c.Import.V] = fmt.Sprintf(", and no module nested in it could be looked up: %v", err)
		case mod == "":
			notes[c.Import.V] = ", nor does any module nested in it"
		default:
			plan.Lacks = append(plan.Lacks, gomod.Lack{Pos: pos, Label: c.Label(i), Import: c.Import.V, Module: mod, Version: version})
		}
	}
	return notes
}

// vendorLacks returns what main's vendor directory lacks of goMod, the
// main module's go.mod as it is (nil) or is to be, as an error that names
// it, or else pkgs, the entries whose packages it lacks (unvendored); nil
// when it lacks nothing.
func vendorLacks(opts Options, main *gomod.Main, goMod []byte, pkgs diag.List) (*gomod.VendorError, error) {
	lacks, err := main.VendorLacks(goMod)
	if err != nil || len(lacks) == 0 && len(pkgs) == 0 {
		return nil, err
	}
	if len(lacks) > 0 {
		pkgs = nil // go mod vendor copies them with the modules
	}
	rel := shortPath(opts.WorkDir)
	return &gomod.VendorError{ModulesTxt: rel(main.ModulesTxt()), Dir: rel(main.Dir), Lacks: lacks, Packages: pkgs, Written: goMod != nil}, nil
}

// unvendored returns, at their entries, the packages that inVendor, the
// load from the vendor directory, missed and cached, the load from the
// module cache with go.mod as it is, found: packages of modules go.mod
// requires that vendor/ lacks, since go mod vendor copies only those the
// main module imports.
func unvendored(m *manifest.Manifest, inVendor, cached *listing) diag.List {
	if inVendor == nil || cached == nil || cached == inVendor {
		return nil
	}
	var list diag.List
	for i, c := range m.Entries {
		lp, found := inVendor.pkgs[c.Import.V], cached.pkgs[c.Import.V]
		if lp == nil || !slices.Contains(inVendor.missing, lp) || found == nil || found.pkg == nil || found.pkg.Module == nil || len(found.pkg.Errors) > 0 {
			continue
		}
		list.Add(c.Import.Pos, "%s: vendor/ lacks package %s, of module %s, which go.mod requires", c.Label(i), c.Import.V, found.pkg.Module.Path)
	}
	return list.Sort()
}

// markBad marks invalid the entries whose version: or replace: the plan
// found wrong, and reports whether there were any.
func markBad(m *manifest.Manifest, plan *gomod.Plan) bool {
	if len(plan.Bad) == 0 {
		return false
	}
	for i := range m.Entries {
		c := &m.Entries[i]
		c.Invalid = c.Invalid || plan.Bad[i]
		c.OnlyNames = c.OnlyNames && !plan.Bad[i]
	}
	return true
}

// mainModule returns the main module that the first load ran in, given
// what it returned. Usually the go command's own report of it says which
// go.mod to compare with the manifest. When the go command failed as a
// whole, or named no go.mod, mainModule finds the main module from dir as
// the go command does: to say so if there is none, and to see whether
// linking what the manifest names puts the load right (the caller still
// holds loadErr). The error it returns stops the run.
func mainModule(ctx context.Context, listed *listing, loadErr error, dir string, env []string) (*gomod.Main, error) {
	if loadErr == nil && listed.goMod != "" {
		return gomod.ReadMain(listed.goMod)
	}
	main, err := gomod.FindMain(ctx, dir, env)
	if err != nil {
		if errors.Is(err, gomod.ErrNoModule) || loadErr == nil {
			return nil, err
		}
		return nil, loadErr
	}
	return main, nil
}

// importPaths lists the import paths of m's entries that have no problem
// reported yet, or only problems with their names.
func importPaths(m *manifest.Manifest) []string {
	paths := make([]string, 0, len(m.Entries))
	for _, c := range m.Entries {
		if !c.Invalid || c.OnlyNames {
			paths = append(paths, c.Import.V)
		}
	}
	return paths
}

// loadConfig says how the go command loads the connectors' packages.
type loadConfig struct {
	// contractPath is the import path of the package of the type a
	// manifest's factory: names, or "".
	contractPath string
	dir          string
	// workDir is the command's working directory, which messages show
	// paths relative to; environ is the go command's environment.
	workDir string
	environ []string
	// flags are Options.BuildFlags.
	flags []string
	// goMod is the go.mod file in effect: the main module's, or modFile.
	goMod string
	// loaderAbove, when set, replaces maxPatternBytes, so that tests can
	// load short lists through the loader package.
	loaderAbove int
	// deps lists, with the packages, every package they import, directly
	// or not (as the loader package's listing always does): a run that
	// may leave a warm record needs to know where each comes from
	// (warmRun.learn).
	deps bool
	// modFile is a go.mod to use instead of the main module's.
	modFile string
	// fromCache loads with -mod=readonly, from the module cache, when the
	// main module's vendor directory lacks what go.mod requires.
	fromCache bool
	// tmp is the go command's GOTMPDIR: a go command stopped by a signal
	// leaves its work directory there, and kvgen removes tmp.
	tmp string
}

// env is the go command's environment for loading.
func (lc loadConfig) env() []string {
	env := lc.environ
	if lc.modFile != "" {
		env = gocmd.WithoutWorkspace(env)
	}
	if lc.tmp != "" {
		env = gocmd.WithTempDir(env, lc.tmp)
	}
	return env
}

// buildFlags are the go command flags that loading needs.
func (lc loadConfig) buildFlags() []string {
	flags := lc.flags
	if lc.modFile != "" {
		flags = append(slices.Clip(flags), "-modfile="+lc.modFile)
	}
	if lc.fromCache {
		flags = append(slices.Clip(flags), "-mod=readonly")
	}
	return flags
}
