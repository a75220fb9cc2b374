// Package pipeline runs kvgen's stages for a command: it parses a
// connectors.yaml manifest, places the registry file, has package link
// load every entry's package with a go.mod that links the manifest's
// modules, and has the generator (package gen) check each constructor
// against the contract and render the static registry file. It returns
// results and errors, and reads no state of the process (Options carries
// the working directory and environment). Generate writes nothing; Update
// writes go.mod, go.sum and the registry file, and Cache.Save the cache.
// The terminal and the exit code are the command's alone.
//
// The kvgen command is built on it, and is its only caller: programs run
// the command and read its -json reports (see examples/driver), so that
// this package can change without breaking them. Its errors are data (see
// Problems), which the command reports. Deployment builds are in
// internal/deploy.
package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/link"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/readfile"
)

// Options says what to generate. The pipeline reads no state of the
// process it runs in: the working directory and the environment come from here.
type Options struct {
	// WorkDir is the absolute directory that the relative paths of
	// Manifest, Output and Dir are relative to: the command's working
	// directory.
	WorkDir string
	// Env is the environment of the go commands the pipeline runs, as os/exec
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
	// replacement the manifest names an error (a *link.LacksError), in
	// the spirit of the go command's -mod=readonly. Otherwise Resolve
	// computes the linked go.mod and go.sum, which Update writes.
	// In a module the go command builds from its vendor directory, a
	// vendor/modules.txt that lacks what go.mod requires is an error too
	// (a *link.VendorError) with ReadOnlyModules, and otherwise
	// Result.VendorErr's, as one that lacks only entries' packages always
	// is: kvgen never writes vendor/.
	ReadOnlyModules bool
	// Cache holds what earlier runs found when checking constructors,
	// keyed by the content of the packages checked, so that packages that
	// have not changed are not read again; the run adds what it finds,
	// which Cache.Save writes. nil turns the cache off.
	Cache *Cache
	// Only, when not nil, keeps of the manifest's entries those with one of
	// these names or aliases, as if the manifest listed no others: what a
	// deployment that runs only some connectors links.
	Only []string
	// TrimPath loads the packages as `go build -trimpath` compiles them,
	// so that a build with that flag after generating finds them compiled
	// in the build cache instead of compiling everything a second time.
	TrimPath bool
	// Warm lets Generate skip loading and checking the packages when the
	// cache holds a record of a successful run whose every input, the
	// file written included, is as it is now, and whose packages all came
	// from module versions go.sum pins (see warm.go). The Result is then
	// the file on disk (with ForOverlay, the file the record keeps), with
	// no Entries and no Contract: for callers that write, compare or
	// build the file, and read neither. It needs Cache.
	Warm bool
	// ForOverlay says the Result is for Overlay, as a deployment
	// build uses it: the file at the output path is what the overlay
	// stands in for, and the run's result does not depend on it. With
	// Warm, the warm record then keeps the file rendered (up to
	// maxWarmRendered bytes), and a hit returns it without reading the
	// file on disk; the Result has no Entries and no Contract.
	ForOverlay bool

	loaderAbove int       // see load.Config.LoaderAbove
	together    *together // see Together
	goEnv       []string  // the values of warmGoEnv, once asked (see withDefaults)
}

// Result is a generated registry file, not yet written anywhere.
type Result struct {
	// Entries are the checked connectors, in manifest order.
	Entries []*gen.Entry
	// Path is the file to write, as a path relative to Options.WorkDir
	// when the manifest's path was; messages show it.
	Path string
	// Package is the generated file's package name.
	Package string
	// Content is the gofmt'd file.
	Content []byte
	// Contract is what the constructors were checked against.
	Contract *gen.Contract
	// Written says that Update wrote the registry file: it did not hold
	// Content.
	Written bool
	// Warnings are problems the run went on despite, sorted by position,
	// each message starting with "warning:": a version: that go.mod's
	// replace line overrides, so that the binary builds from the
	// replacement and not from that version.
	Warnings []*Problem

	warm     *warmRun                     // the warm path's part in the run, or nil
	fromWarm bool                         // Content is the record's, unchecked (a warm hit)
	modules  map[string]string            // on a warm hit, the entries' modules by import path, for Annotate
	manifest *manifest.Manifest           // readManifest's
	file     *outputFile                  // placeOutput's
	linked   *link.Linked                 // link.Load's, its listing dropped
	sources  map[string]*load.SourceFiles // the entries' packages' files, for Summary
	flags    []string                     // Options.BuildFlags
	env      []string                     // Options.Env
}

// Generate runs every stage and returns the file to write. An error in the
// input is a diag.List with every problem found, sorted by position.
//
// The file to write must be one that kvgen may write (see Update); when it
// is not, that is an error at the manifest's output key, or an
// *OutputError when Options.Output named it.
func Generate(ctx context.Context, opts Options) (*Result, error) {
	res, cache, err := resolve(ctx, opts, true)
	if err != nil {
		return nil, err
	}
	if res.fromWarm {
		return res, nil
	}
	if res.Content, err = res.render(cache, opts.WorkDir); err != nil {
		return nil, err
	}
	res.warm.record(res.Content, res.Warnings)
	return res, nil
}

// render is the last stage: the registry file of what resolve checked.
func (r *Result) render(cache *manifestCache, workDir string) ([]byte, error) {
	in, err := gen.NewRenderInput(r.manifest, r.shownManifest(workDir), r.Package, r.linked.ImportPath, r.Contract, r.Entries, r.file.pkg.declared)
	if err != nil {
		return nil, err
	}
	key := cache.hash(in)
	// An existing file that is what these inputs rendered last time is
	// what they render now: kvgen check on an unchanged tree stops here,
	// which saves it 7 to 9% of its processor time at 400 entries.
	if old, err := readfile.Read(r.file.abs, readfile.Max); err == nil && cache.rendered(key, old) {
		return old, nil
	}
	content, err := gen.Render(in)
	if err != nil {
		return nil, err
	}
	cache.remember(key, content)
	return content, nil
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
	rel, err := filepath.Rel(filepath.Dir(r.file.abs), m)
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

// resolve runs the stages of a run up to rendering, each taking what
// those before it made:
//
//	readManifest     Options → the manifest, with the entries Options.Only keeps
//	placeOutput      manifest → the file to write and its package (*outputFile)
//	checkWritable    *outputFile → whether kvgen may write it (forWrite only)
//	link.Load        manifest, *outputFile → the entries' packages as the go
//	                 command lists them with a go.mod that links the
//	                 manifest's modules (*link.Linked)
//	gen.ReadContract manifest, *link.Linked → the contract factory: names
//	gen.Check        manifest, *link.Linked, contract → the entries that pass
//
// Generate then renders the file (render). resolve returns the manifest's
// cache, which render uses too. Problems that let the run go on
// collect in errs, so that one run reports them all.
func resolve(ctx context.Context, opts Options, forWrite bool) (*Result, *manifestCache, error) {
	opts, err := withDefaults(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	var errs diag.List
	m, err := readManifest(&errs, opts)
	if err != nil {
		return nil, nil, err
	}
	res, cache, err := resolveManifest(ctx, opts, forWrite, m, slices.Clone(errs))
	return res, cache, atPins(m, err, errs)
}

// atPins places the problems in err that checking m's entries found at the
// pin: lines that changed those entries (see manifest.AtPin); the
// manifest's own problems, in parsed, stay where they were found.
func atPins(m *manifest.Manifest, err error, parsed diag.List) error {
	list, ok := err.(diag.List)
	if !ok {
		return err
	}
	moved := make(diag.List, len(list))
	for i, e := range list {
		moved[i] = e
		if !slices.Contains(parsed, e) {
			moved[i] = m.AtPin(e)
		}
	}
	return moved.Sort()
}

// resolveManifest is resolve for the manifest m, with the problems found
// in it so far in errs.
func resolveManifest(ctx context.Context, opts Options, forWrite bool, m *manifest.Manifest, errs diag.List) (*Result, *manifestCache, error) {
	out := placeOutput(&errs, opts, m)
	if opts.Dir == "" {
		opts.Dir = defaultLoadDir(opts, out.abs)
	}
	out.root = gocmd.ModuleRoot(opts.loadDir())
	if forWrite {
		if err := out.checkWritable(&errs, m); err != nil {
			return nil, nil, err
		}
	}
	named := gen.ContractOf(m)
	cache := opts.Cache.forManifest(opts.abs(opts.Manifest), out.path)
	var warm *warmRun
	if forWrite && errs.Err() == nil {
		warm = newWarmRun(opts, m, out, cache, named.Path)
		if res := warm.hit(); res != nil {
			return res, cache, nil
		}
	}
	loads.Add(1)
	ld, err := link.Load(ctx, &errs, linkRequest(opts, m, out, named.Path, warm != nil))
	if err != nil {
		return nil, nil, err
	}
	contract, contractOK := gen.ReadContract(&errs, m, named, ld.Listing)
	entries, err := gen.Check(&errs, m, ld.Listing, ld.ImportPath, contract, contractOK, diag.ShortPath(opts.WorkDir), cache)
	if err != nil {
		return nil, nil, err
	}
	if err := errs.Err(); err != nil {
		return nil, nil, err // the entries that passed are in the cache
	}
	res := &Result{
		Entries:  entries,
		Path:     out.path,
		Package:  out.pkg.name,
		Contract: contract,
		Warnings: ld.Warnings,
		manifest: m,
		file:     out,
		sources:  make(map[string]*load.SourceFiles, len(ld.Listing.Packages)),
		flags:    opts.BuildFlags(),
		env:      opts.Env,
		warm:     warm,
	}
	warm.learn(ld, entries)
	for path, lp := range ld.Listing.Packages {
		res.sources[path] = lp.Src
	}
	ld.Listing = nil // the listing is not kept
	res.linked = ld
	return res, cache, nil
}

// linkRequest is what link.Load loads for a run with opts of m, whose
// registry file is out: the contract's package at contractPath too, and,
// with deps, every package the listed ones import.
func linkRequest(opts Options, m *manifest.Manifest, out *outputFile, contractPath string, deps bool) link.Request {
	return link.Request{
		Manifest:    m,
		ManifestDir: filepath.Dir(opts.abs(opts.Manifest)),
		OutputDir:   filepath.Dir(out.abs),
		Load: load.Config{
			ContractPath: contractPath,
			Dir:          opts.loadDir(),
			WorkDir:      opts.WorkDir,
			Environ:      opts.Env,
			Flags:        opts.BuildFlags(),
			LoaderAbove:  opts.loaderAbove,
			Deps:         deps,
		},
		// The existing registry file stands aside while loading: it may
		// be what closes an import cycle through a connector that
		// imports the output package, and kvgen could never write a file
		// without it.
		Overlay:         out.pkg.overlay(out.abs),
		ReadOnlyModules: opts.ReadOnlyModules,
		Shared:          opts.together.shared(opts),
	}
}

// withDefaults checks opts and fills in what it leaves out.
func withDefaults(ctx context.Context, opts Options) (Options, error) {
	if opts.Manifest == "" {
		opts.Manifest = "connectors.yaml"
	}
	if !filepath.IsAbs(opts.WorkDir) {
		return opts, fmt.Errorf("pipeline: Options.WorkDir must be an absolute directory, got %q", opts.WorkDir)
	}
	if opts.Env == nil {
		return opts, errors.New("pipeline: Options.Env is nil; give the go commands an environment, such as os.Environ()")
	}
	// Whatever GOFLAGS says, loading never writes go.mod or go.sum: the
	// go.mod that generate links is written by Update alone. A run that
	// may take the warm path asks go env, in the same go command run,
	// what the key holds, which includes the GOOS, GOARCH and
	// CGO_ENABLED a go env file may set: they choose the output
	// package's files (Options.buildContext), read before the key is.
	var keys []string
	if opts.Warm && opts.Cache != nil {
		keys = warmGoEnv
	}
	env, values, err := opts.together.goEnv(ctx, opts, keys)
	if err != nil {
		return opts, err
	}
	opts.Env, opts.goEnv = env, values
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
		m.Entries = slices.DeleteFunc(m.Entries, func(c manifest.Entry) bool {
			return !slices.ContainsFunc(opts.Only, c.HasName)
		})
	}
	errs.Append(token.Position{}, err)
	return m, nil
}

// Summary returns the first sentence of the doc comment of e's
// constructor, or of its package's documentation where the constructor
// has none (a package may hold more than one connector, or much else
// besides): what a listing shows of an entry. It is "" when there is none,
// or e's package's files cannot be parsed.
func (r *Result) Summary(e *gen.Entry) string {
	src := r.sources[e.ImportPath]
	if src == nil {
		return ""
	}
	return gen.Summary(src, e.Constructor)
}

// Difference is how the file at a Result's Path differs from its Content.
type Difference struct {
	// Missing is set when there is no file at Path.
	Missing bool
	// Line is the first line of the file on disk that differs, counting
	// from 1; 1 for a missing file.
	Line int
	// Diff is a unified diff from the file on disk to Content. Its old
	// side is the file "(on disk)", "(committed)" when git says it is
	// the file of the checkout's HEAD, unchanged, or "(missing)".
	Diff []byte
}

// Stale returns how the file at r.Path differs from r.Content, or nil when
// it holds r.Content.
func (r *Result) Stale() (*Difference, error) {
	old, err := readfile.Read(r.file.abs, readfile.Max)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &Difference{Missing: true, Line: 1, Diff: unifiedDiff(r.Path, sideMissing, nil, r.Content)}, nil
	case err != nil:
		return nil, err
	case bytes.Equal(old, r.Content), bytes.Equal(bytes.ReplaceAll(old, []byte("\r\n"), []byte("\n")), r.Content):
		// The same file in a checkout that turns line ends into CRLF
		// (Git's core.autocrlf on Windows) is current.
		return nil, nil
	}
	side := sideOnDisk
	if committed(r.file.abs, r.env) {
		side = sideCommitted
	}
	return &Difference{Line: diag.FirstDifferentLine(old, r.Content), Diff: unifiedDiff(r.Path, side, old, r.Content)}, nil
}

// Overlay writes, into a new directory inside dir, an absolute scratch
// directory of the caller's, what a go build needs to compile the
// registries rs without the working tree changing: an overlay that stands
// each one's Content in for the file at its Path and, when one generated
// with linked modules (see ModuleChanges), the linked go.mod and go.sum;
// at most one may have. It returns the go command flags that build with
// them as the connectors were loaded (with those of Options.BuildFlags,
// the same for every one). With modules linked the go command must run
// outside workspace mode, which refuses -modfile. The caller removes dir
// when the build is done.
func Overlay(dir string, rs ...*Result) ([]string, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("pipeline: Overlay wants an absolute directory, got %q", dir)
	}
	if len(rs) == 0 {
		return nil, errors.New("pipeline: Overlay wants a registry")
	}
	dir, err := os.MkdirTemp(dir, "overlay-")
	if err != nil {
		return nil, err
	}
	replace := make(map[string]string, len(rs))
	owner := make(map[string]*Result, len(rs))
	var linked *Result
	vendor := false
	for i, r := range rs {
		file := filepath.Join(dir, fmt.Sprintf("%d-%s", i, filepath.Base(r.file.abs)))
		if err := os.WriteFile(file, r.Content, 0o644); err != nil {
			return nil, err
		}
		// The file as written, and through its symbolic links: the go
		// command reads a package's files from the directory it reached
		// the package by, which may be either.
		for _, p := range []string{r.file.abs, r.file.resolved} {
			if p == "" {
				continue
			}
			if o := owner[p]; o != nil && o != r {
				return nil, fmt.Errorf("%s and %s are one file, and one file holds one registry", o.Path, r.Path)
			}
			owner[p], replace[p] = r, file
		}
		if r.linked.Modules != nil {
			if linked != nil {
				return nil, fmt.Errorf("the registries %s and %s both need go.mod and go.sum linked; run go tool kvgen generate for them first", linked.Path, r.Path)
			}
			linked = r
		}
		vendor = vendor || r.linked.Vendor != nil
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err != nil {
		return nil, err
	}
	flags := append(slices.Clip(rs[0].flags), "-overlay="+filepath.Join(dir, "overlay.json"))
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		return nil, err
	}
	if linked != nil {
		u := linked.linked.Modules
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
	if vendor {
		// The modules linked are not in vendor/, and the build leaves it
		// alone: it takes them, and the rest, from the module cache.
		flags = append(flags, "-mod=readonly")
	}
	return flags, nil
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
// while kvgen was linking the manifest's modules: nothing was written, and
// generating again links them from the new files.
var ErrModulesChanged = link.ErrChanged

// maxLinkAttempts bounds how often Update links the manifest's modules
// again because another process changed go.mod in the meantime: each try
// after the first starts from that process's go.mod, so two runs at once
// need two tries at most, and only a stream of edits exhausts them.
const maxLinkAttempts = 10

// Update is what `kvgen generate` does: Generate, then it writes the
// linked go.mod and go.sum (see ModuleChanges), as go get would, and then
// the registry file (see Written). When another process changes go.mod
// or go.sum in the meantime, it generates again from the new files, up to
// maxLinkAttempts times in all, and then gives up with an error that
// wraps ErrModulesChanged, having written nothing. A vendored module's
// vendor/ that lacks what go.mod now requires does not stop it: the files
// are written, and Result.VendorErr says to run go mod vendor. When go.mod
// and go.sum are written and the registry file cannot be, the Result
// comes back with the error.
func Update(ctx context.Context, opts Options) (*Result, error) {
	for attempt := 1; ; attempt++ {
		res, err := Generate(ctx, opts)
		if err != nil {
			return nil, err
		}
		err = res.writeModules(ctx)
		switch {
		case errors.Is(err, ErrModulesChanged) && attempt < maxLinkAttempts:
			continue // link again what go.mod now lacks
		case errors.Is(err, ErrModulesChanged):
			return nil, fmt.Errorf("%w, %d times in a row; nothing was written: run kvgen again once the other runs are done", err, attempt)
		case err != nil:
			return nil, err
		}
		res.Written, err = res.write()
		return res, err
	}
}

// ModuleChanges says, one line each, what the linked go.mod and go.sum
// change: the require and replace lines that the manifest's modules need
// and the main module's go.mod lacks. It is empty when go.mod has them.
func (r *Result) ModuleChanges() []string {
	if r.linked.Modules == nil {
		return nil
	}
	return r.linked.Modules.Changes
}

// GoModPath is the go.mod that ModuleChanges change: the main module's,
// that of the output file's module; "" when nothing changes.
func (r *Result) GoModPath() string {
	if r.linked.Modules == nil {
		return ""
	}
	return r.linked.Modules.GoModPath
}

// VendorErr returns, as a *link.VendorError, what the main module's
// vendor directory lacks of the linked go.mod (see ModuleChanges), or of
// the entries' packages, when the go command builds the module from it;
// nil when it lacks nothing, or the module is not vendored. The packages
// it lacks come first, each at its entry, joined with it. Generate loads
// such a module's packages from the module cache, as go build does once
// go mod vendor has recorded them; kvgen never writes vendor/.
func (r *Result) VendorErr() error {
	switch ve := r.linked.Vendor; {
	case ve == nil:
		return nil
	case len(ve.Packages) > 0:
		return errors.Join(ve.Packages, ve)
	default:
		return ve
	}
}

// writeModules writes the linked go.mod and go.sum (see ModuleChanges),
// if anything changes, as go get would. It writes nothing and returns an
// error wrapping ErrModulesChanged when another process changed either
// file since Generate read it.
func (r *Result) writeModules(ctx context.Context) error {
	if r.linked.Modules == nil {
		return nil
	}
	return r.linked.Modules.Write(ctx)
}

// ReadMarkers reads the markers of the contract factory names
// (IMPORT/PATH.TypeName; "" for gen.DefaultFactory), listed as the go
// command lists it for opts: see gen.ReadMarkers.
func ReadMarkers(ctx context.Context, opts Options, factory string) (*gen.Contract, error) {
	opts, err := withDefaults(ctx, opts)
	if err != nil {
		return nil, err
	}
	return gen.ReadMarkers(ctx, opts.loadDir(), opts.Env, opts.BuildFlags(), factory)
}
