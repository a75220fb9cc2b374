package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/mod/modfile"
	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/link"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/readfile"
)

// The warm path: with Options.Warm, a run whose every input is what the
// last successful run for the same manifest saw returns the file on disk
// without loading or checking a package. What a run reads is the
// manifests, go.mod and go.sum, the output package's other files, the go
// command's environment, the options, and the packages the go command
// loads; the packages are left out of the key, so the warm path is taken
// only when their content follows from the rest: each comes from a module
// version that go.sum pins, which the go command verifies when it
// downloads it and never changes after. A package of the main module, of
// a module replaced by a directory, of a workspace or of a vendor
// directory can change without any file in the key changing: with any of
// those the run takes the ordinary path.
//
// The record is one warmRecord in the manifest's cache file: the key
// (the hash of a warmInput, salted with the generator's identity), the
// SHA-256 of the file that run rendered, and the modules its packages came
// from. It is used only when the key matches and the file on disk has that
// hash. A run for an overlay (Options.ForOverlay, kvgen build) renders
// another file than the one on disk, which it does not read: its record
// keeps the file rendered itself, one for each key, and a hit returns that.

// warmGoEnv are the go command's variables the key holds, as `go env`
// prints them: what selects the toolchain and the files of every package,
// and, for GOWORK and GOMOD, whether the run is in workspace mode and which
// main module the command sees from Options.WorkDir.
var warmGoEnv = []string{
	"GOVERSION", "GOROOT", "GOOS", "GOARCH", "CGO_ENABLED", "GOEXPERIMENT",
	"GOAMD64", "GOARM", "GOARM64", "GO386", "GOMIPS", "GOMIPS64", "GOPPC64", "GORISCV64", "GOWASM",
	"GOWORK", "GOMOD",
}

// maxWarmRendered bounds the file a record for an overlay keeps: a
// registry of the manifest's most entries is a few MiB at most.
const maxWarmRendered = 8 << 20

// loads counts the runs that loaded packages (link.Load), for tests.
var loads atomic.Int64

// warmInput is everything a run reads, but the packages, that decides its
// result: its hash is the warm record's key. A field added here is in the
// key; what a run comes to read must be added here, or the run must not
// take the warm path when it does.
type warmInput struct {
	// Generator is the generator's identity, as the cache was opened
	// with (it salts the hash as well).
	Generator string
	// WorkDir, Manifest, Output, Only, Tags, TrimPath and LoadDir are the
	// options that change the result; LoadDir is Options.Dir, absolute,
	// or its default. NoOnly tells a nil Only (every entry) from an
	// empty one. ReadOnlyModules is not among them: a run leaves a record
	// only when go.mod lacked nothing, and then it changes nothing, so
	// that generate and check share one record.
	WorkDir, Manifest, Output string
	Only                      []string
	NoOnly                    bool
	Tags                      []string
	TrimPath                  bool
	LoadDir                   string
	// ForOverlay is Options.ForOverlay: such a run's record holds what
	// it rendered, and the file on disk is none of its input.
	ForOverlay bool
	// Manifests is the SHA-256 of the manifest's bytes and of every
	// manifest it extends (manifest.Manifest.SHA256).
	Manifests string
	// File is the absolute path of the file generated.
	File string
	// GoMod and GoSum are the main module's files: the path and the
	// SHA-256 of the bytes of each ("" for a missing go.sum).
	GoMod, GoModSHA256, GoSumSHA256 string
	// Package and Declared are the output package's name and the
	// top-level names its other files declare.
	Package  string
	Declared map[string]bool
	// GoEnv are the values of warmGoEnv, in order, and GoFlags the
	// GOFLAGS the go command runs with.
	GoEnv   []string
	GoFlags string
	// GoDebug is GODEBUG as the go command runs with it, and OwnGoDebug
	// as this process does, which decides what go/types reports (an
	// alias by its name or by what it stands for, say).
	GoDebug, OwnGoDebug string
}

// warmRecord is what the last successful run that could have taken the
// warm path left in the cache.
type warmRecord struct {
	// Key is the hash of that run's warmInput; Content the SHA-256 of the
	// file it rendered.
	Key     string `json:"key"`
	Content string `json:"content"`
	// Modules are the modules its packages came from (the entries', the
	// contract's and the registry's), as path@version, replacements
	// resolved.
	Modules []string `json:"modules"`
	// Rendered is the file rendered, and EntryModules the entries'
	// modules by import path (for Result.Annotate), for a run for an
	// overlay, whose hit reads no file.
	Rendered     []byte            `json:"rendered,omitempty"`
	EntryModules map[string]string `json:"entry_modules,omitempty"`
}

// warmRun is the warm path's part in one run: the key of its inputs, if
// they can decide the result, read before loading.
type warmRun struct {
	opts  Options
	m     *manifest.Manifest
	out   *outputFile
	cache *manifestCache
	key   string // "" when the run cannot take the warm path
	sum   []byte // go.sum, to find pinned modules in
	// modules are what the load found, for the record (learn), and
	// entryModules the entries' modules by import path.
	modules      []string
	entryModules map[string]string
}

// newWarmRun reads the inputs of a run with opts of m into out, and
// returns nil unless the run may take the warm path or leave a record for
// one.
func newWarmRun(opts Options, m *manifest.Manifest, out *outputFile, cache *manifestCache, contractPath string) *warmRun {
	if !opts.Warm || cache.path == "" || out.pkg == nil {
		return nil
	}
	w := &warmRun{opts: opts, m: m, out: out, cache: cache}
	in, sum, ok := w.input(contractPath)
	if !ok {
		return nil
	}
	w.key, w.sum = cache.hash(in), sum
	if w.key == "" {
		return nil
	}
	return w
}

// input reads the warm key's inputs, and reports whether the run's
// packages can be taken to follow from them: see the comment at the top.
func (w *warmRun) input(contractPath string) (warmInput, []byte, bool) {
	opts, out := w.opts, w.out
	goFlags := gocmd.Lookup(opts.Env, "GOFLAGS")
	if out.root == "" || gocmd.WorkFile(opts.loadDir(), opts.Env) != "" || !warmFlags(goFlags) {
		return warmInput{}, nil, false
	}
	goModPath := filepath.Join(out.root, "go.mod")
	if fi, err := os.Stat(filepath.Join(out.root, "vendor")); err == nil && fi.IsDir() {
		return warmInput{}, nil, false
	}
	goMod, err := readfile.Read(goModPath, readfile.Max)
	if err != nil {
		return warmInput{}, nil, false
	}
	sum, err := readfile.ReadIfExists(filepath.Join(out.root, "go.sum"), readfile.Max)
	if err != nil {
		return warmInput{}, nil, false
	}
	// Parse, not ParseLax, which drops the replace lines read below.
	f, err := modfile.Parse(goModPath, goMod, nil)
	if err != nil || f.Module == nil {
		return warmInput{}, nil, false
	}
	mainPath := f.Module.Mod.Path
	for _, r := range f.Replace {
		if r.New.Version == "" {
			// A module replaced by a directory, which can change under
			// any package that imports it.
			return warmInput{}, nil, false
		}
	}
	// A package of the main module's path sees its files, which the key
	// does not hold; so does a pinned one that imports such a package,
	// which only the load can tell (learn).
	paths := append([]string{load.RegistryPath, contractPath}, w.m.ImportPaths()...)
	for _, p := range paths {
		if load.InModule(p, mainPath) {
			return warmInput{}, nil, false
		}
	}
	// The go command's variables, which withDefaults asked with GOFLAGS.
	if len(opts.goEnv) != len(warmGoEnv) {
		return warmInput{}, nil, false
	}
	env := func(key string) string { return opts.goEnv[slices.Index(warmGoEnv, key)] }
	if work := env("GOWORK"); work != "" && work != "off" {
		return warmInput{}, nil, false
	}
	if env("GOMOD") != goModPath {
		// The go command run from WorkDir sees another main module (or
		// none), whose toolchain line GOVERSION would follow.
		return warmInput{}, nil, false
	}
	in := warmInput{
		Generator: w.cache.salt,
		WorkDir:   opts.WorkDir, Manifest: opts.Manifest, Output: opts.Output,
		Only: opts.Only, NoOnly: opts.Only == nil,
		Tags: opts.Tags, TrimPath: opts.TrimPath, LoadDir: opts.loadDir(),
		ForOverlay: opts.ForOverlay,
		Manifests:  w.m.SHA256,
		File:       out.abs,
		GoMod:      goModPath, GoModSHA256: hashBytes(goMod),
		Package: out.pkg.name, Declared: out.pkg.declared,
		GoEnv: opts.goEnv, GoFlags: goFlags,
		GoDebug: gocmd.Lookup(opts.Env, "GODEBUG"), OwnGoDebug: os.Getenv("GODEBUG"),
	}
	if sum != nil {
		in.GoSumSHA256 = hashBytes(sum)
	}
	return in, sum, true
}

// warmFlags reports whether GOFLAGS leave the go command reading what the
// key holds: not another go.mod (-modfile), an overlay, or vendor/.
func warmFlags(goFlags string) bool {
	for _, f := range strings.Fields(goFlags) {
		name, value, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if name == "modfile" || name == "overlay" || name == "mod" && value == "vendor" {
			return false
		}
	}
	return true
}

// sumPinned returns the module versions go.sum pins the content of, as
// path@version: those with a line for their zip, not for their go.mod
// alone.
func sumPinned(sum []byte) map[string]bool {
	pinned := map[string]bool{}
	for line := range bytes.Lines(sum) {
		if f := strings.Fields(string(line)); len(f) == 3 && !strings.HasSuffix(f[1], "/go.mod") {
			pinned[f[0]+"@"+f[1]] = true
		}
	}
	return pinned
}

// hit returns the Result of the last successful run with these inputs,
// when every module its packages came from is one go.sum pins and what it
// rendered is at hand: the file on disk, which must hash to it, or for an
// overlay the record's own copy; else nil.
func (w *warmRun) hit() *Result {
	if w == nil {
		return nil
	}
	rec := w.last()
	if rec == nil || len(rec.Modules) == 0 {
		return nil
	}
	pinned := sumPinned(w.sum)
	for _, mv := range rec.Modules {
		if !pinned[mv] {
			return nil
		}
	}
	content := rec.Rendered
	if !w.opts.ForOverlay {
		var err error
		if content, err = readfile.Read(w.out.abs, readfile.Max); err != nil {
			return nil
		}
	}
	if hashBytes(content) != rec.Content {
		return nil
	}
	return w.result(content, rec.EntryModules)
}

// last returns the record of the last successful run with w's key, or
// nil.
func (w *warmRun) last() *warmRecord {
	if w.opts.ForOverlay {
		return w.cache.built(w.key)
	}
	if rec := w.cache.warm(); rec != nil && rec.Key == w.key {
		return rec
	}
	return nil
}

// result is the Result of a warm hit: content, which is what the inputs
// render. It has no Entries and no Contract: the commands that ask for
// the warm path, generate, check and build, read neither.
func (w *warmRun) result(content []byte, modules map[string]string) *Result {
	w.cache.keepChecks()
	return &Result{
		Path:     w.out.path,
		Package:  w.out.pkg.name,
		Content:  content,
		fromWarm: true,
		modules:  modules,
		manifest: w.m,
		file:     w.out,
		linked:   &link.Linked{},
		flags:    w.opts.BuildFlags(),
		env:      w.opts.Env,
	}
}

// learn records the modules the run's packages came from, and those of
// every package they import, directly or not, or that some did not come
// from a module version go.sum can pin (the run's record then says so by
// its absence): a pinned package that imports one of the main module's
// sees files the key does not hold. ld is the load, before its listing is
// dropped.
func (w *warmRun) learn(ld *link.Linked, entries []*gen.Entry) {
	if w == nil {
		return
	}
	w.modules, w.entryModules = nil, nil
	if ld.Modules != nil || ld.Vendor != nil || !ld.Listing.Deps {
		return // go.mod is to change, vendor/ is in the way, or the imports are unknown
	}
	pkgs := []*packages.Package{ld.Listing.RegistryPkg, ld.Listing.ContractPkg}
	entryModules := make(map[string]string, len(entries))
	for _, e := range entries {
		lp := ld.Listing.Packages[e.ImportPath]
		if lp == nil {
			return
		}
		pkgs = append(pkgs, lp.Pkg)
		entryModules[e.ImportPath] = e.Module
	}
	if slices.Contains(pkgs, nil) {
		return
	}
	var mods []string
	pinned := true
	packages.Visit(pkgs, func(p *packages.Package) bool {
		if p.Module == nil && len(p.Errors) == 0 {
			return true // the standard library's, which GOROOT and GOVERSION in the key name
		}
		mv, ok := pinnedModule(p)
		if !ok {
			pinned = false
		} else if !slices.Contains(mods, mv) {
			mods = append(mods, mv)
		}
		return ok
	}, nil)
	if pinned {
		w.modules, w.entryModules = mods, entryModules
	}
}

// pinnedModule returns the module version p came from, as path@version,
// and whether go.sum can pin it: a module version, or one replaced by
// another version, and not the main module or one replaced by a directory.
func pinnedModule(p *packages.Package) (string, bool) {
	if p == nil || p.Module == nil || p.Module.Main {
		return "", false
	}
	m := p.Module
	if m.Replace != nil {
		m = m.Replace
	}
	if m.Version == "" {
		return "", false
	}
	return m.Path + "@" + m.Version, true
}

// record leaves in the cache what a successful run that rendered content
// learnt, if its packages came from pinned modules and its inputs are
// still those read before it loaded them; otherwise it drops the record,
// which no longer describes the last run.
func (w *warmRun) record(content []byte, warnings []*Problem) {
	if w == nil {
		return
	}
	rec := &warmRecord{Key: w.key, Content: hashBytes(content), Modules: w.modules}
	if w.opts.ForOverlay {
		rec.Rendered, rec.EntryModules = content, w.entryModules
	}
	switch {
	case len(w.modules) == 0, len(warnings) > 0:
		// Warnings are printed by the run that finds them: a manifest
		// that has some takes the ordinary path.
		rec = nil
	case w.opts.ForOverlay && len(content) > maxWarmRendered:
		rec = nil
	default:
		if again := newWarmRunAfter(w); again == nil || again.key != w.key {
			rec = nil
		}
	}
	if w.opts.ForOverlay {
		w.cache.setBuilt(w.key, rec)
		return
	}
	w.cache.setWarm(rec)
}

// newWarmRunAfter reads the inputs of the run w began again, at its end:
// the manifests, the output package and the rest.
func newWarmRunAfter(w *warmRun) *warmRun {
	if m, err := manifest.LoadIn(w.opts.WorkDir, w.opts.Manifest); m == nil || err != nil || m.SHA256 != w.m.SHA256 {
		return nil
	}
	pkg, err := readOutputPackage(w.m, w.out.path, w.out.abs, w.opts.buildContext())
	if err != nil {
		return nil
	}
	out := *w.out
	out.pkg = pkg
	again := &warmRun{opts: w.opts, m: w.m, out: &out, cache: w.cache}
	in, _, ok := again.input(contractPathOf(w.m))
	if !ok {
		return nil
	}
	again.key = w.cache.hash(in)
	return again
}

// contractPathOf is the import path of the package of m's contract.
func contractPathOf(m *manifest.Manifest) string { return gen.ContractOf(m).Path }
