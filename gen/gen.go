// Package gen is the kvgen generator: it parses a connectors.yaml manifest,
// resolves every entry's package with the go command, checks each
// constructor against the registry contract with go/types, and renders the
// static registry file. It returns results and errors, and reads no state
// of the process (Options carries the working directory and environment).
// It writes nothing until the command calls Result.Write (and, for the
// check cache, CheckCache.Save); the terminal and the exit code are the
// command's alone.
//
// It serves build systems and tools that generate, check or list a
// registry without running the kvgen command, which is built on it; its
// errors are data (see Problems). Deployment builds are in gen/deploy.
package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/gomod"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/readfile"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Options says what to generate. gen reads no state of the process it runs
// in: the working directory and the environment come from here.
type Options struct {
	// WorkDir is the absolute directory that the relative paths of
	// Manifest, Output and Dir are relative to: the command's working
	// directory.
	WorkDir string
	// Env is the environment of the go commands gen runs, as os/exec
	// takes it; the command passes its own (os.Environ()). It must not be
	// nil.
	Env []string
	// Manifest is the manifest's path as the user wrote it; positions in
	// errors use it. Default "connectors.yaml".
	Manifest string
	// Output overrides the manifest's output file; relative to WorkDir,
	// like a command-line path.
	Output string
	// Tags are build tags used when loading the connectors' packages.
	Tags []string
	// Dir is where the go command loads the connectors' packages from;
	// default the output file's directory, whose module compiles the
	// registry (or its nearest existing parent). It decides the main
	// module.
	Dir string
	// ReadOnlyModules makes a go.mod that lacks a module, version or
	// replacement the manifest names an error (a *gomod.LacksError), in
	// the spirit of the go command's -mod=readonly. Otherwise Resolve
	// computes the linked go.mod and go.sum, which Result.WriteModules writes.
	// In a module the go command builds from its vendor directory, a
	// vendor/modules.txt that lacks what go.mod requires is an error too
	// (a *gomod.VendorError) with ReadOnlyModules, and otherwise
	// Result.VendorErr's: kvgen never writes vendor/.
	ReadOnlyModules bool
	// Cache holds what earlier runs found when checking constructors,
	// keyed by the content of the packages checked, so that packages that
	// have not changed are not read again; the run adds what it finds,
	// which CheckCache.Save writes. nil turns the cache off.
	Cache *CheckCache
	// Only, when not nil, keeps of the manifest's entries those with one of
	// these names or aliases, as if the manifest listed no others: what a
	// deployment that runs only some connectors links.
	Only []string
	// TrimPath loads the packages as `go build -trimpath` compiles them,
	// so that a build with that flag after generating finds them compiled
	// in the build cache instead of compiling everything a second time.
	TrimPath bool

	loaderAbove int // see loadConfig
}

// Result is a generated registry file, not yet written anywhere.
type Result struct {
	// Entries are the checked connectors, in manifest order.
	Entries []*Entry
	// Path is the file to write, as a path relative to Options.WorkDir
	// when the manifest's path was; messages show it.
	Path string
	// Package is the generated file's package name.
	Package string
	// Content is the gofmt'd file.
	Content []byte
	// Contract is what the constructors were checked against.
	Contract *Contract
	// Warnings are problems the run went on despite, sorted by position,
	// each message starting with "warning:": a version: that go.mod's
	// replace line overrides, so that the binary builds from the
	// replacement and not from that version.
	Warnings []*Problem

	declared   map[string]bool         // top-level names of the output package's other files
	abs        string                  // Path made absolute
	target     string                  // Path with symbolic links resolved: the file Write replaces
	output     string                  // Options.Output, when it named Path
	importPath string                  // the output package's import path, if known
	root       string                  // the module's root directory
	flags      []string                // Options.BuildFlags
	env        []string                // Options.Env
	sources    map[string]*sourceFiles // the entries' packages' files, for Docs
	manifest   *manifest.Manifest      // the parsed manifest
	modules    *gomod.Update           // go.mod and go.sum linked with the manifest's modules, if go.mod lacks them
	vendor     *gomod.VendorError      // what vendor/ lacks of the go.mod linked, when the main module builds from it
}

// Generate runs every stage and returns the file to write. An error in the
// input is a diag.List with every problem found, sorted by position.
//
// The file to write must be one that kvgen may write (see Write); when it
// is not, that is an error at the manifest's output key, or an
// *OutputError when Options.Output named it.
func Generate(ctx context.Context, opts Options) (*Result, error) {
	res, cache, err := resolve(ctx, opts, true)
	if err != nil {
		return nil, err
	}
	desc, err := describe(res.manifest, res.Contract, res.importPath, res.Entries)
	if err != nil {
		return nil, err
	}
	shown := res.shownManifest(opts.WorkDir)
	key := renderKey(cache.salt, shown, res.Package, res.Contract, desc, res.Entries, res.declared)
	// An existing file that is what these inputs rendered last time is
	// what they render now: kvgen check on an unchanged tree stops here.
	if old, err := readfile.Read(res.abs, readfile.Max); err == nil && cache.rendered(key, old) {
		res.Content = old
		return res, nil
	}
	res.Content, err = emit(shown, res.Package, res.Contract, desc, res.Entries, res.declared)
	if err != nil {
		return nil, err
	}
	cache.remember(key, res.Content)
	return res, nil
}

// shownManifest is the manifest's path as the generated file names it:
// relative to the file's directory, in slashes, so that it reads the same
// from any working directory and in any checkout, and leads a reader from
// the file to what it was generated from.
func (r *Result) shownManifest(workDir string) string {
	m := r.manifest.File
	if !filepath.IsAbs(m) {
		m = filepath.Join(workDir, m)
	}
	rel, err := filepath.Rel(filepath.Dir(r.abs), m)
	if err != nil {
		return filepath.Base(m)
	}
	return filepath.ToSlash(rel)
}

// Resolve parses the manifest and checks every entry against its package,
// without rendering: what `kvgen list` needs.
func Resolve(ctx context.Context, opts Options) (*Result, error) {
	res, _, err := resolve(ctx, opts, false)
	return res, err
}

// resolve is Resolve, returning the manifest's check cache; forWrite adds the
// checks of the file to write. Each stage takes what the one before it
// made; problems that let the run go on collect in errs, so that one run
// reports them all.
func resolve(ctx context.Context, opts Options, forWrite bool) (*Result, *checkCache, error) {
	opts, err := withDefaults(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	var errs diag.List
	m, err := readManifest(&errs, opts)
	if err != nil {
		return nil, nil, err
	}
	res, out := placeOutput(&errs, opts, m)
	if opts.Dir == "" {
		opts.Dir = defaultLoadDir(opts, res.abs)
	}
	if forWrite {
		if err := res.checkOutput(&errs, opts); err != nil {
			return nil, nil, err
		}
	}
	kind := contractOf(m)
	lc, err := newLoadConfig(opts, kind.Path)
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(lc.tmp)
	// The existing registry file stands aside while loading: it may be
	// what closes an import cycle through a connector that imports the
	// output package, and kvgen could never write a file without it.
	listed, err := loadLinked(ctx, &errs, opts, res, &lc, out.overlay(res.abs))
	if err != nil {
		return nil, nil, err
	}
	cache, err := checkResolved(&errs, opts, res, kind, listed)
	if err != nil {
		return nil, nil, err
	}
	return res, cache, nil
}

// withDefaults checks opts and fills in what it leaves out.
func withDefaults(ctx context.Context, opts Options) (Options, error) {
	if opts.Manifest == "" {
		opts.Manifest = "connectors.yaml"
	}
	if !filepath.IsAbs(opts.WorkDir) {
		return opts, fmt.Errorf("gen: Options.WorkDir must be an absolute directory, got %q", opts.WorkDir)
	}
	if opts.Env == nil {
		return opts, errors.New("gen: Options.Env is nil; give the go commands an environment, such as os.Environ()")
	}
	// Whatever GOFLAGS says, loading never writes go.mod or go.sum: the
	// go.mod that generate links is written by Update.Write alone.
	env, err := gocmd.ReadOnlyModules(ctx, opts.WorkDir, opts.Env)
	if err != nil {
		return opts, err
	}
	opts.Env = env
	return opts, nil
}

// abs makes p, relative to o.WorkDir, absolute.
func (o Options) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(o.WorkDir, p)
}

// loadDir is the absolute directory the go command loads from; resolve
// sets Dir when the caller left it to the output's.
func (o Options) loadDir() string {
	return o.abs(o.Dir)
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
	if moduleRoot(d) == "" {
		return opts.abs(filepath.Dir(opts.Manifest))
	}
	return d
}

// readManifest parses the manifest, keeping the entries opts.Only names.
// A manifest whose problems all lie within entries still comes back, its
// problems in errs: the other entries are checked too, and every problem
// is reported in one run.
func readManifest(errs *diag.List, opts Options) (*manifest.Manifest, error) {
	m, err := manifest.LoadIn(opts.WorkDir, opts.Manifest)
	if m == nil {
		return nil, err
	}
	if opts.Only != nil {
		m.Connectors = slices.DeleteFunc(m.Connectors, func(c manifest.Connector) bool {
			return !slices.ContainsFunc(opts.Only, c.HasName)
		})
	}
	errs.Append(token.Position{}, err)
	return m, nil
}

// placeOutput returns the Result for m, naming the file to write, and the
// package that file goes into as it is now; nil if it could not be
// inspected, which is in errs.
func placeOutput(errs *diag.List, opts Options, m *manifest.Manifest) (*Result, *outputPackage) {
	res := &Result{manifest: m, Path: opts.Output, flags: opts.BuildFlags(), env: opts.Env}
	if res.Path == "" {
		res.Path = filepath.Join(filepath.Dir(opts.Manifest), m.Output.V)
	}
	res.abs = opts.abs(res.Path)
	out, err := inspectOutput(m, res.Path, res.abs, buildContext(opts.Env, opts.Tags))
	if err != nil {
		errs.Append(outputPos(m), err)
	} else {
		res.Package, res.declared = out.name, out.declared
	}
	return res, out
}

// checkOutput checks that kvgen may write r.Path (see Write). A problem
// with the file Options.Output names stops the run, being the caller's
// and not the manifest's; one with the manifest's output is in errs.
func (r *Result) checkOutput(errs *diag.List, opts Options) error {
	r.output, r.root = opts.Output, moduleRoot(opts.loadDir())
	if err := r.checkTarget(); err != nil {
		if r.output != "" {
			return err
		}
		errs.Append(outputPos(r.manifest), err)
	}
	return nil
}

// newLoadConfig says how to load the connectors' packages, and those of
// contract, the package of the type factory: names, if any. Its tmp is a
// new directory that the caller removes: what the go command leaves when a
// signal stops it goes with it.
func newLoadConfig(opts Options, contract string) (loadConfig, error) {
	lc := loadConfig{contract: contract, dir: opts.loadDir(), workDir: opts.WorkDir, environ: opts.Env, flags: opts.BuildFlags(), loaderAbove: opts.loaderAbove}
	var err error
	lc.tmp, err = gocmd.TempDir(opts.Env)
	return lc, err
}

// loadLinked loads the packages of res.manifest's entries with a go.mod
// that links the modules the manifest names: the main module's when it
// does, else one linked in a scratch directory, which it puts in
// res.modules. It sets lc.goMod, and lc.modFile when it linked; an entry
// whose version: or replace: is wrong is reported in errs and left out.
func loadLinked(ctx context.Context, errs *diag.List, opts Options, res *Result, lc *loadConfig, overlay map[string][]byte) (*listing, error) {
	m := res.manifest
	// A failure that stops the run comes with the problems found so far:
	// the manifest's and the output file's.
	stop := func(err error) error {
		if found := errs.Err(); found != nil {
			return errors.Join(found, err)
		}
		return err
	}
	paths := importPaths(m)
	listed, err := load(ctx, *lc, overlay, paths)
	main, merr := mainModule(ctx, listed, err, lc.dir, opts.Env)
	if merr != nil {
		return nil, stop(merr)
	}
	lc.goMod = main.GoMod
	res.importPath = packagePath(main, filepath.Dir(res.abs))
	plan, perr := gomod.NewPlan(m, main, filepath.Dir(opts.abs(opts.Manifest)))
	errs.Append(outputPos(m), perr)
	if plan == nil {
		return nil, errs.Err()
	}
	res.Warnings = plan.Warnings.Sort()
	if len(plan.Bad) > 0 {
		for i := range m.Connectors {
			c := &m.Connectors[i]
			c.Invalid = c.Invalid || plan.Bad[i]
		}
		paths = importPaths(m)
	}
	vendored := main.Vendored(opts.Env)
	if len(plan.Lacks) > 0 {
		if opts.ReadOnlyModules {
			lerr := plan.Err()
			if le, ok := lerr.(*gomod.LacksError); ok {
				le.Vendored = vendored
			}
			return nil, stop(lerr)
		}
		scratch, merr := os.MkdirTemp(lc.tmp, "mod-")
		if merr != nil {
			return nil, merr
		}
		// The scratch go.mod is used outside workspace mode: it takes in
		// what go.work gives the main module.
		if err := main.UseWorkspace(opts.Env); err != nil {
			return nil, stop(err)
		}
		if res.modules, err = plan.Link(ctx, scratch, opts.Env); err != nil {
			return nil, stop(err)
		}
		if vendored {
			if res.vendor, err = vendorLacks(opts, main, res.modules.GoMod); err != nil {
				return nil, stop(err)
			}
		}
		// Load again with the linked go.mod as go build will use it:
		// read only, so that a go.mod still lacking something fails
		// here.
		lc.modFile, lc.goMod = res.modules.ModFile, res.modules.ModFile
		lc.fromCache = res.vendor != nil
		listed, err = load(ctx, *lc, overlay, paths)
		res.modules.ModFile = "" // the scratch go.mod goes with this run
	} else if vendored {
		if res.vendor, err = vendorLacks(opts, main, nil); err != nil {
			return nil, stop(err)
		}
		if res.vendor != nil {
			if opts.ReadOnlyModules {
				return nil, stop(res.vendor)
			}
			// The go command refuses the vendor directory: load from the
			// module cache, as go build will once go mod vendor ran.
			lc.fromCache = true
			listed, err = load(ctx, *lc, overlay, paths)
		}
	}
	if err != nil {
		return nil, stop(err)
	}
	mods, versions := main.Requires(), main.Versions()
	if res.modules != nil {
		mods, versions = res.modules.Requires(), res.modules.Versions()
	}
	listed.explainMissing(ctx, *lc, mods)
	listed.explainNotCached(mods, versions)
	return listed, nil
}

// vendorLacks returns what main's vendor directory lacks of goMod, the
// main module's go.mod as it is (nil) or is to be, as an error that names
// it; nil when it lacks nothing.
func vendorLacks(opts Options, main *gomod.Main, goMod []byte) (*gomod.VendorError, error) {
	lacks, err := main.VendorLacks(goMod)
	if err != nil || len(lacks) == 0 {
		return nil, err
	}
	rel := shortPath(opts.WorkDir)
	return &gomod.VendorError{ModulesTxt: rel(main.ModulesTxt()), Dir: rel(main.Dir), Lacks: lacks, Written: goMod != nil}, nil
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
// reported yet.
func importPaths(m *manifest.Manifest) []string {
	paths := make([]string, 0, len(m.Connectors))
	for _, c := range m.Connectors {
		if !c.Invalid {
			paths = append(paths, c.Import.V)
		}
	}
	return paths
}

// checkResolved reads the contract, kind filled in from its package, and
// checks every loaded entry against it, through the manifest's check
// cache, which it returns for rendering.
func checkResolved(errs *diag.List, opts Options, res *Result, kind *Contract, listed *listing) (*checkCache, error) {
	m := res.manifest
	res.sources, listed.kind = make(map[string]*sourceFiles, len(listed.pkgs)), kind
	var contractOK bool
	for path, lp := range listed.pkgs {
		res.sources[path] = lp.src
	}
	res.Contract, contractOK = resolveNamed(errs, m, listed)
	listed.kind = res.Contract
	cache := opts.Cache.file(opts.abs(opts.Manifest), res.Path)
	var err error
	res.Entries, err = checkEntries(errs, m, listed, res.importPath, shortPath(opts.WorkDir), cache, contractOK)
	if err != nil {
		return nil, err
	}
	if err := errs.Err(); err != nil {
		return nil, err // the entries that passed are in the cache
	}
	return cache, nil
}

// resolveNamed reads the type that m's factory: names (by default
// DefaultFactory) from its package's export data, and the markers of its
// doc comment from the package's source, and returns the contract it is;
// a problem is reported at factory:, and ok is false.
func resolveNamed(errs *diag.List, m *manifest.Manifest, listed *listing) (c *Contract, ok bool) {
	c = listed.kind
	at := func(format string, args ...any) (*Contract, bool) {
		pos := m.Factory.Pos
		if !m.Factory.Set {
			pos = token.Position{Filename: m.File, Line: 1, Column: 1}
		}
		errs.Add(pos, "factory %s: %s", suggest.Quote(c.String()), fmt.Sprintf(format, args...))
		return c, false
	}
	p := listed.contract
	switch {
	case p == nil:
		return at("package %s was not loaded", suggest.Quote(c.Path))
	case len(p.Errors) > 0:
		// Without the position, which may lie in the loader package.
		return at("package %s: %s", suggest.Quote(c.Path), oneLine(p.Errors[0].Msg))
	case p.ExportFile == "":
		return at("package %s does not build", suggest.Quote(c.Path))
	}
	pkg, err := readExport(token.NewFileSet(), map[string]*types.Package{}, p)
	if err != nil {
		return at("%v", err)
	}
	files, err := newSourceFiles(p).parsed()
	if err != nil {
		return at("reading its markers: %v", err)
	}
	marked := *c
	var problem string
	if marked.Roles, marked.Registry, problem = readMarkers(files, c.Name); problem != "" {
		return at("%s", problem)
	}
	_, filled, problem := resolveContract(pkg, marked)
	if problem != "" {
		return at("%s", problem)
	}
	return &filled, true
}

// checkEntries checks every entry of m against its loaded package, and
// returns those that pass; outPath is the import path of the package the
// registry goes into, "" if unknown. An entry whose check the cache remembers
// needs no types, and the packages of the others are decoded together, in
// parallel, if they are not yet. Without contractOK, the contract could
// not be read, and only what does not need it is checked.
func checkEntries(errs *diag.List, m *manifest.Manifest, listed *listing, outPath string, rel func(string) string, cache *checkCache, contractOK bool) ([]*Entry, error) {
	type miss struct {
		index   int
		e       *Entry
		namePos token.Position
		lp      *loadedPackage
		key     string
	}
	var misses []miss
	var decode []*loadedPackage
	// The contract's export data is part of every key: a changed contract
	// is checked afresh.
	var regExport, contractName string
	if listed.registry != nil {
		regExport = listed.registry.ExportFile
	}
	if listed.contract != nil {
		regExport += "\x00" + listed.contract.ExportFile
		contractName = listed.kind.key()
	}
	entries := make([]*Entry, len(m.Connectors))
	for i, c := range m.Connectors {
		rolesOK := !contractOK || checkRoles(errs, c, i, listed.kind)
		if c.Invalid || !rolesOK {
			continue // its problems are reported already
		}
		if outPath != "" && c.Import.V == outPath {
			errs.Add(c.Import.Pos, "%s: %s is the package the registry is generated into, and a package cannot import itself; move the connector to its own package, or generate the registry elsewhere with output:", c.Label(i), c.Import.V)
			continue
		}
		lp := listed.pkgs[c.Import.V]
		e, namePos := prepareEntry(errs, c, i, lp)
		if e == nil {
			continue
		}
		if !contractOK {
			continue
		}
		key := cache.key(regExport, lp.pkg.ExportFile, e.ImportPath, e.Constructor, e.Roles, contractName)
		if r, ok := cache.get(key); ok {
			e.Adapt = r.Adapt
			e.Decl = position(token.Position{Filename: r.DeclFile, Line: r.DeclLine}, e.ImportPath, lp.pkg.GoFiles, rel)
			entries[i] = e
			continue
		}
		if lp.types == nil && !slices.Contains(decode, lp) {
			decode = append(decode, lp)
		}
		misses = append(misses, miss{i, e, namePos, lp, key})
	}
	if len(decode) > 0 {
		if err := listed.decode(decode); err != nil {
			return nil, err
		}
	}
	for _, ms := range misses {
		if ok, decl := checkTypes(errs, ms.e, ms.index, ms.namePos, ms.lp, rel); ok {
			entries[ms.index] = ms.e
			cache.put(ms.key, cachedCheck{Adapt: ms.e.Adapt, DeclFile: decl.Filename, DeclLine: decl.Line})
		}
	}
	return slices.DeleteFunc(entries, func(e *Entry) bool { return e == nil }), nil
}

// Docs fills in each entry's summary (see [Entry.Doc]); only listings need
// it, so Resolve leaves it out.
func (r *Result) Docs() {
	for _, e := range r.Entries {
		if src := r.sources[e.ImportPath]; src != nil {
			files, _ := src.parsed() // what does not parse has no doc to give
			e.Doc = summary(files, e.Constructor)
		}
	}
}

// Stale reports whether the file at r.Path differs from r.Content, and
// returns a unified diff of the difference. The diff's old side is the
// file "(on disk)", or "(committed)" when git says it is the file of the
// checkout's HEAD, unchanged.
func (r *Result) Stale() (bool, []byte, error) {
	old, err := readfile.Read(r.abs, readfile.Max)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	if bytes.Equal(old, r.Content) {
		return false, nil, nil
	}
	return true, unifiedDiff(r.Path, committed(r.abs, r.env), old, r.Content), nil
}

// Overlay writes, into a new directory inside dir, an absolute scratch
// directory of the caller's, what a go build needs to compile r's registry
// without the working tree changing: an overlay that stands r.Content in
// for the file at r.Path and, when r.modules is set, the linked go.mod and
// go.sum. It returns the go command flags that build with them as the
// connectors were loaded (with those of Options.BuildFlags). With
// r.modules set the go command must run outside workspace mode, which
// refuses -modfile. The caller removes dir when the build is done.
func (r *Result) Overlay(dir string) ([]string, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("gen: Overlay wants an absolute directory, got %q", dir)
	}
	dir, err := os.MkdirTemp(dir, "overlay-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, filepath.Base(r.abs))
	if err := os.WriteFile(file, r.Content, 0o644); err != nil {
		return nil, err
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {r.abs: file}})
	if err != nil {
		return nil, err
	}
	flags := append(slices.Clip(r.flags), "-overlay="+filepath.Join(dir, "overlay.json"))
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		return nil, err
	}
	if u := r.modules; u != nil {
		modFile := filepath.Join(dir, "go.mod")
		if err := os.WriteFile(modFile, u.BuildMod, 0o644); err != nil {
			return nil, err
		}
		if u.GoSum != nil {
			if err := os.WriteFile(filepath.Join(dir, "go.sum"), u.GoSum, 0o644); err != nil {
				return nil, err
			}
		}
		flags = append(flags, "-modfile="+modFile)
	}
	if r.vendor != nil {
		// The modules linked are not in vendor/, and the build leaves it
		// alone: it takes them, and the rest, from the module cache.
		flags = append(flags, "-mod=readonly")
	}
	return flags, nil
}

// loadConfig says how the go command loads the connectors' packages.
type loadConfig struct {
	// contract is the import path of the package of the type a
	// manifest's factory: names, or "".
	contract string
	dir      string
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

// BuildFlags are the go command flags that load or build the connectors'
// packages as o loads them: -trimpath under TrimPath, and the build tags.
func (o Options) BuildFlags() []string {
	var flags []string
	if o.TrimPath {
		flags = append(flags, "-trimpath")
	}
	if len(o.Tags) > 0 {
		flags = append(flags, "-tags="+strings.Join(o.Tags, ","))
	}
	return flags
}

// ErrModulesChanged says that another process changed go.mod or go.sum
// while kvgen was linking the manifest's modules: WriteModules wrote
// nothing, and generating again links them from the new files.
var ErrModulesChanged = gomod.ErrChanged

// MaxLinkAttempts bounds how often GenerateLinked links the manifest's
// modules again because another process changed go.mod in the meantime:
// each try after the first starts from that process's go.mod, so two runs
// at once need two tries at most, and only a stream of edits exhausts
// them.
const MaxLinkAttempts = 10

// GenerateLinked is Generate followed by Result.WriteModules, as `kvgen
// generate` runs them: when another process changes go.mod or go.sum in
// the meantime ([ErrModulesChanged]), it generates again from the new
// files, up to MaxLinkAttempts times in all, and then gives up with an
// error that wraps ErrModulesChanged. It does not write the registry
// file: the caller shows Result.ModuleChanges, and writes the file with
// Result.Write.
func GenerateLinked(ctx context.Context, opts Options) (*Result, error) {
	for attempt := 1; ; attempt++ {
		res, err := Generate(ctx, opts)
		if err != nil {
			return nil, err
		}
		err = res.WriteModules(ctx)
		switch {
		case errors.Is(err, ErrModulesChanged) && attempt < MaxLinkAttempts:
			continue // link again what go.mod now lacks
		case errors.Is(err, ErrModulesChanged):
			return nil, fmt.Errorf("%w, %d times in a row; nothing was written: run kvgen again once the other runs are done", err, attempt)
		case err != nil:
			return nil, err
		}
		return res, nil
	}
}

// ModuleChanges says, one line each, what the linked go.mod and go.sum
// change: the require and replace lines that the manifest's modules need
// and the main module's go.mod lacks. It is empty when go.mod has them.
func (r *Result) ModuleChanges() []string {
	if r.modules == nil {
		return nil
	}
	return r.modules.Changes
}

// VendorErr returns, as a *gomod.VendorError, what the main module's
// vendor directory lacks of the linked go.mod (see ModuleChanges) when
// the go command builds the module from it; nil when it lacks nothing,
// or the module is not vendored. Generate loads such a module's packages
// from the module cache, as go build does once go mod vendor has
// recorded them; kvgen never writes vendor/.
func (r *Result) VendorErr() error {
	if r.vendor == nil {
		return nil
	}
	return r.vendor
}

// WriteModules writes the linked go.mod and go.sum (see ModuleChanges),
// if anything changes, as go get would. It writes nothing and returns an
// error wrapping ErrModulesChanged when another process changed either
// file since Generate read it.
func (r *Result) WriteModules(ctx context.Context) error {
	if r.modules == nil {
		return nil
	}
	return r.modules.Write(ctx)
}

// checkRoles checks that the roles entry c lists are roles the contract
// declares, and reports those that are not at their positions.
func checkRoles(errs *diag.List, c manifest.Connector, index int, contract *Contract) bool {
	if len(c.Roles) == 0 {
		return true
	}
	declared := contract.RoleNames()
	if len(declared) == 0 {
		errs.Add(c.Roles[0].Pos, "%s: roles: the contract %s declares no roles (with a %s line), so remove roles:", c.Label(index), contract.String(), MarkerRoles)
		return false
	}
	ok := true
	for _, r := range c.Roles {
		if slices.Contains(declared, r.V) {
			continue
		}
		msg := fmt.Sprintf("%s: unknown role %s", c.Label(index), suggest.Quote(r.V))
		if near := suggest.Nearest(r.V, declared, 1); len(near) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", near[0])
		} else {
			msg += fmt.Sprintf("; the contract %s declares %s", contract.String(), quoteJoin(declared))
		}
		errs.Add(r.Pos, "%s", msg)
		ok = false
	}
	return ok
}
