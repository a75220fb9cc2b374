// Package link is the stage before generation: it loads the packages of
// a manifest's entries with a go.mod that links the modules the manifest
// names. It works out which require and replace lines go.mod lacks for
// each entry's version: and replace: (newPlan), and lets the go command
// complete the module graph and go.sum in a scratch directory, as go get
// would (Plan.Link); the packages are then listed again with that go.mod.
//
// It is the one package that edits go.mod and go.sum, and only when its
// caller asks: Update.Write writes what Link made, as kvgen generate does,
// while kvgen build uses the scratch copy through -modfile and discards
// it. It never writes vendor/: a vendored module's vendor/ that lacks
// what go.mod requires is said, with the command that fills it.
package link

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/manifest"
)

// Request is what to load, and how.
type Request struct {
	// Manifest is the manifest whose entries' packages to load. Entries
	// whose version: or replace: the link finds wrong are marked invalid
	// in it.
	Manifest *manifest.Manifest
	// ManifestDir is the manifest's absolute directory, which replace:
	// paths are relative to.
	ManifestDir string
	// OutputDir is the absolute directory of the file to generate.
	OutputDir string
	// Load says how the go command lists the packages: from which
	// directory, which decides the main module, with which environment
	// and flags. Tmp, ModFile and FromCache are the link's to set.
	Load load.Config
	// Overlay is the go command's overlay while loading.
	Overlay map[string][]byte
	// ReadOnlyModules makes a go.mod that lacks what the manifest names
	// an error (a *LacksError), as does, in a vendored module, a
	// vendor/ that lacks what go.mod requires (a *VendorError).
	ReadOnlyModules bool
	// Shared, when not nil, returns what a load shared with other
	// manifests listed of paths, or nil when the run is to list them on
	// its own.
	Shared func(ctx context.Context, lc load.Config, overlay map[string][]byte, paths []string) *load.Listing
}

// Linked is what Load makes: the entries' packages as the go command
// listed them, with the go.mod that links the manifest's modules.
type Linked struct {
	// Listing is the packages as the go command listed them with the
	// linked go.mod.
	Listing *load.Listing
	// ImportPath is the import path of the package the file goes into,
	// "" if unknown.
	ImportPath string
	// Warnings are problems the run goes on despite: a version: that
	// go.mod's replace line overrides.
	Warnings []*diag.Error
	// Modules is go.mod and go.sum linked with the manifest's modules,
	// when go.mod lacks them: its Write writes them. Vendor is what
	// vendor/ lacks of the go.mod linked, when the main module builds
	// from it.
	Modules *Update
	Vendor  *VendorError
}

// Load loads the packages of the manifest's entries, and the contract's
// package (Request.Load.ContractPath), with a go.mod that links the
// modules the manifest names: the main module's when it does, else one
// linked in a scratch directory, whose edits it returns in Modules. An
// entry whose version: or replace: is wrong is reported in errs and left
// out.
func Load(ctx context.Context, errs *diag.List, req Request) (*Linked, error) {
	m, env := req.Manifest, req.Load.Environ
	r := &linkRun{ctx: ctx, errs: errs, req: req, lc: req.Load}
	var err error
	// What a go command stopped by a signal leaves goes with tmp.
	if r.lc.Tmp, err = gocmd.TempDir(env); err != nil {
		return nil, err
	}
	defer os.RemoveAll(r.lc.Tmp)
	r.paths = m.ImportPaths()
	var listed *load.Listing
	if req.Shared != nil {
		listed = req.Shared(ctx, r.lc, req.Overlay, r.paths)
	}
	if listed == nil {
		listed, err = load.Load(ctx, r.lc, req.Overlay, r.paths)
	}
	main, merr := mainModule(ctx, listed, err, r.lc.Dir, env)
	if merr != nil {
		return nil, r.stop(merr)
	}
	r.main = main
	ld := &Linked{ImportPath: main.packagePath(req.OutputDir)}
	plan, perr := newPlan(m, main, req.ManifestDir)
	errs.Append(m.OutputPos(), perr)
	if plan == nil {
		return nil, errs.Err()
	}
	r.plan = plan
	ld.Warnings = plan.Warnings.Sort()
	if markBad(m, plan) {
		r.paths = m.ImportPaths()
	}
	r.vendored = main.Vendored(env)
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
	ld.Listing = listed
	return ld, nil
}

// linkRun is what the steps of one Load share: its request, the go
// command's configuration, which a step may change for the steps after
// it, and the main module and plan the first load found.
type linkRun struct {
	ctx      context.Context
	errs     *diag.List
	req      Request
	lc       load.Config
	paths    []string
	main     *Main
	plan     *Plan
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
func (r *linkRun) loadNested(listed *load.Listing, err error) (nested *load.Listing, notes map[string]string) {
	nlc, nested, nerr := r.lc, listed, err
	if r.vendored && (err != nil || len(listed.Missing) > 0) {
		nlc.FromCache = true
		nested, nerr = load.Load(r.ctx, nlc, r.req.Overlay, r.paths)
	}
	if nerr == nil && len(nested.Missing) > 0 {
		notes = linkNested(r.ctx, nlc, r.req.Manifest, r.main, r.plan, nested)
	}
	return nested, notes
}

// linkLacks links the modules the plan says go.mod lacks in a scratch
// go.mod, which ld.Modules then holds, and loads the packages again with
// it; with ReadOnlyModules it fails instead, saying what go.mod lacks.
// Its errors are the run's to return.
func (r *linkRun) linkLacks(ld *Linked) (*load.Listing, error) {
	if r.req.ReadOnlyModules {
		lerr := r.plan.Err()
		if le, ok := lerr.(*LacksError); ok {
			le.Vendored = r.vendored
		}
		return nil, r.stop(lerr)
	}
	scratch, err := os.MkdirTemp(r.lc.Tmp, "mod-")
	if err != nil {
		return nil, err
	}
	// The scratch go.mod is used outside workspace mode: it takes in
	// what go.work gives the main module.
	if err := r.main.useWorkspace(r.lc.Environ); err != nil {
		return nil, r.stop(err)
	}
	if ld.Modules, err = r.plan.Link(r.ctx, scratch, r.lc.Environ); err != nil {
		return nil, r.stop(err)
	}
	if r.vendored {
		if ld.Vendor, err = vendorLacks(r.lc.WorkDir, r.main, ld.Modules.GoMod, nil); err != nil {
			return nil, r.stop(err)
		}
	}
	// Load again with the linked go.mod as go build will use it: read
	// only, so that a go.mod still lacking something fails here.
	r.lc.ModFile = ld.Modules.ModFile
	r.lc.FromCache = ld.Vendor != nil
	listed, err := load.Load(r.ctx, r.lc, r.req.Overlay, r.paths)
	ld.Modules.ModFile = "" // the scratch go.mod goes with this run
	if err != nil {
		return nil, r.stop(err)
	}
	return listed, nil
}

// reloadUnvendored, for a main module that builds from vendor/ and whose
// go.mod lacks nothing, records in ld.Vendor what vendor/ lacks; if it
// lacks something, it loads the packages again from the module cache, as
// go build will once go mod vendor ran, since the go command refuses that
// vendor directory. listed and err are the first load's, nested the
// module cache's (loadNested). Its errors are the run's to return.
func (r *linkRun) reloadUnvendored(ld *Linked, listed *load.Listing, err error, nested *load.Listing) (*load.Listing, error) {
	var verr error
	if ld.Vendor, verr = vendorLacks(r.lc.WorkDir, r.main, nil, unvendored(r.req.Manifest, listed, nested)); verr != nil {
		return nil, r.stop(verr)
	}
	if ld.Vendor != nil {
		// Packages alone go on: check says what to run once it knows
		// whether the registry file imports them.
		if r.req.ReadOnlyModules && len(ld.Vendor.Lacks) > 0 {
			return nil, r.stop(ld.Vendor)
		}
		r.lc.FromCache = true
		listed, err = load.Load(r.ctx, r.lc, r.req.Overlay, r.paths)
	}
	if err != nil {
		return nil, r.stop(err)
	}
	return listed, nil
}

// explain completes the errors of the entries' packages that listed
// lacks, by the modules go.mod requires as linked (ld.Modules, else the
// main module's): which module should provide each, the notes of
// loadNested, and what the module cache lacks.
func (r *linkRun) explain(ld *Linked, listed *load.Listing, notes map[string]string) {
	mods, versions := r.main.Requires(), r.main.Versions()
	if ld.Modules != nil {
		mods, versions = ld.Modules.Requires(), ld.Modules.Versions()
	}
	listed.ExplainMissing(r.ctx, r.lc, mods)
	for path, note := range notes {
		var nim *load.NotInModuleError
		if lp := listed.Packages[path]; lp != nil && errors.As(lp.Err, &nim) && !strings.HasSuffix(nim.Msg, note) {
			nim.Msg += note
		}
	}
	listed.ExplainNotCached(mods, versions)
}

// linkNested adds to the plan, for each entry whose package a module
// go.mod requires lacks, the module nested in that one which provides it,
// as go get would find it: at the entry's version:, else the latest. An
// entry that no nested module provides keeps its error, which its note
// (by import path) completes: none has it, or none could be looked up.
func linkNested(ctx context.Context, lc load.Config, m *manifest.Manifest, main *Main, plan *Plan, listed *load.Listing) (notes map[string]string) {
	listed.ExplainMissing(ctx, lc, main.Requires())
	notes = map[string]string{}
	for i := range m.Entries {
		c := &m.Entries[i]
		lp := listed.Packages[c.Import.V]
		var nim *load.NotInModuleError
		if c.Invalid || plan.Bad[i] || c.Replace.Set || lp == nil || !errors.As(lp.Err, &nim) || !nim.Nested {
			continue
		}
		pos := c.Import.Pos
		if c.Version.Set {
			pos = c.Version.Pos
		}
		mod, version, err := nestedModule(ctx, main.Dir, lc.Environ, c.Import.V, nim.Module, c.Version.V)
		switch {
		case err != nil:
			notes[c.Import.V] = fmt.Sprintf(", and no module nested in it could be looked up: %v", err)
		case mod == "":
			notes[c.Import.V] = ", nor does any module nested in it"
		default:
			plan.Lacks = append(plan.Lacks, Lack{Pos: pos, Label: c.Label(i), Import: c.Import.V, Module: mod, Version: version})
		}
	}
	return notes
}

// vendorLacks returns what main's vendor directory lacks of goMod, the
// main module's go.mod as it is (nil) or is to be, as an error that names
// it, or else pkgs, the entries whose packages it lacks (unvendored); nil
// when it lacks nothing.
func vendorLacks(workDir string, main *Main, goMod []byte, pkgs diag.List) (*VendorError, error) {
	lacks, err := main.vendorLacks(goMod)
	if err != nil || len(lacks) == 0 && len(pkgs) == 0 {
		return nil, err
	}
	if len(lacks) > 0 {
		pkgs = nil // go mod vendor copies them with the modules
	}
	rel := diag.ShortPath(workDir)
	return &VendorError{modulesTxt: rel(main.modulesTxt()), Dir: rel(main.Dir), Lacks: lacks, Packages: pkgs, Written: goMod != nil}, nil
}

// unvendored returns, at their entries, the packages that inVendor, the
// load from the vendor directory, missed and cached, the load from the
// module cache with go.mod as it is, found: packages of modules go.mod
// requires that vendor/ lacks, since go mod vendor copies only those the
// main module imports.
func unvendored(m *manifest.Manifest, inVendor, cached *load.Listing) diag.List {
	if inVendor == nil || cached == nil || cached == inVendor {
		return nil
	}
	var list diag.List
	for i, c := range m.Entries {
		lp, found := inVendor.Packages[c.Import.V], cached.Packages[c.Import.V]
		if lp == nil || !slices.Contains(inVendor.Missing, lp) || found == nil || found.Pkg == nil || found.Pkg.Module == nil || len(found.Pkg.Errors) > 0 {
			continue
		}
		list.Add(c.Import.Pos, "%s: vendor/ lacks package %s, of module %s, which go.mod requires", c.Label(i), c.Import.V, found.Pkg.Module.Path)
	}
	return list.Sort()
}

// markBad marks invalid the entries whose version: or replace: the plan
// found wrong, and reports whether there were any.
func markBad(m *manifest.Manifest, plan *Plan) bool {
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
func mainModule(ctx context.Context, listed *load.Listing, loadErr error, dir string, env []string) (*Main, error) {
	if loadErr == nil && listed.GoMod != "" {
		return ReadMain(listed.GoMod)
	}
	main, err := FindMain(ctx, dir, env)
	if err != nil {
		if errors.Is(err, ErrNoModule) || loadErr == nil {
			return nil, err
		}
		return nil, loadErr
	}
	return main, nil
}
