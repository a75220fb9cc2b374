// Package gen is the kvgen generator: it parses a connectors.yaml manifest,
// resolves every entry's package with the go command, checks each
// constructor against the registry contract with go/types, and renders the
// static registry file. It returns results and errors; only cmd/kvgen
// touches the disk, the terminal and the exit code.
package gen

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvgen/kvgen/gen/diag"
	"github.com/kvgen/kvgen/gen/gomod"
	"github.com/kvgen/kvgen/gen/manifest"
	"github.com/kvgen/kvgen/internal/gocmd"
)

// Options says what to generate.
type Options struct {
	// Manifest is the manifest's path as the user wrote it; positions in
	// errors use it. Default "connectors.yaml".
	Manifest string
	// Output overrides the manifest's output file; relative to the current
	// directory, like a command-line path.
	Output string
	// Tags are build tags used when loading the connectors' packages.
	Tags []string
	// ModFile, if set, is a go.mod file to use instead of the main
	// module's (the go command's -modfile), as `kvgen build` does.
	ModFile string
	// Dir is where the go command loads the connectors' packages from;
	// default the manifest's directory. It decides the main module.
	Dir string
	// ReadOnlyModules makes a go.mod that lacks a module, version or
	// replacement the manifest names an error (a *gomod.LacksError), in
	// the spirit of the go command's -mod=readonly. Otherwise Resolve
	// computes the linked go.mod and go.sum into Result.Modules. Neither
	// applies with ModFile, whose caller has linked it.
	ReadOnlyModules bool
}

// Result is a generated registry file, not yet written anywhere.
type Result struct {
	// Manifest is the parsed manifest.
	Manifest *manifest.Manifest
	// Entries are the checked connectors, in manifest order.
	Entries []*Entry
	// Path is the file to write, as a path relative to the current
	// directory when the manifest's path was.
	Path string
	// Package is the generated file's package name.
	Package string
	// Content is the gofmt'd file.
	Content []byte
	// Modules is the main module's go.mod and go.sum linked with the
	// modules the manifest names, or nil when go.mod already has them.
	// The packages were loaded with it.
	Modules *gomod.Update

	declared map[string]bool // top-level names of the output package's other files
	target   string          // Path with symbolic links resolved: the file Write replaces
	flag     string          // the -o value that named Path, if any
	root     string          // the module's root directory
}

// Generate runs every stage and returns the file to write. An error in the
// input is a diag.List with every problem found, sorted by position.
//
// The file to write must be one that kvgen may write (see Write); when it
// is not, that is an error at the manifest's output key, or on -o.
func Generate(ctx context.Context, opts Options) (*Result, error) {
	res, err := resolve(ctx, opts, true)
	if err != nil {
		return nil, err
	}
	res.Content, err = emit(res.Manifest.File, res.Package, res.Entries, res.declared)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Resolve parses the manifest and checks every entry against its package,
// without rendering: what `kvgen list` needs.
func Resolve(ctx context.Context, opts Options) (*Result, error) {
	return resolve(ctx, opts, false)
}

// resolve is Resolve; forWrite adds the checks of the file to write.
func resolve(ctx context.Context, opts Options, forWrite bool) (*Result, error) {
	if opts.Manifest == "" {
		opts.Manifest = "connectors.yaml"
	}
	m, err := manifest.Load(opts.Manifest)
	if err != nil {
		return nil, err
	}
	res := &Result{Manifest: m}
	dir := filepath.Dir(opts.Manifest)

	var errs diag.List
	res.Path = opts.Output
	if res.Path == "" {
		res.Path = filepath.Join(dir, m.Output.V)
	}
	out, err := inspectOutput(m, res.Path, opts.Tags)
	if err != nil {
		errs.Append(outputPos(m), err)
	} else {
		res.Package, res.declared = out.name, out.declared
	}

	paths := make([]string, 0, len(m.Connectors))
	for _, c := range m.Connectors {
		paths = append(paths, c.Import.V)
	}
	loadDir := dir
	if opts.Dir != "" {
		loadDir = opts.Dir
	}
	absDir, err := filepath.Abs(loadDir)
	if err != nil {
		return nil, err
	}
	if forWrite {
		res.flag, res.root = opts.Output, moduleRoot(absDir)
		if err := res.checkTarget(); err != nil {
			if res.flag != "" {
				return nil, err // a command-line problem, not the manifest's
			}
			errs.Append(outputPos(m), err)
		}
	}
	lc := loadConfig{dir: absDir, tags: opts.Tags, modFile: opts.ModFile, modMod: opts.ModFile != ""}
	if opts.ModFile == "" {
		main, err := gomod.FindMain(ctx, absDir)
		if err != nil {
			return nil, err
		}
		lc.goMod = main.GoMod
		plan, err := gomod.NewPlan(m, main)
		if err != nil {
			errs.Append(outputPos(m), err)
			return nil, errs.Err()
		}
		if len(plan.Lacks) > 0 {
			if opts.ReadOnlyModules {
				return nil, plan.Err()
			}
			scratch, err := os.MkdirTemp("", "kvgen-mod-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(scratch)
			if res.Modules, err = plan.Link(ctx, scratch); err != nil {
				return nil, err
			}
			// Load with the linked go.mod as go build will use it: read
			// only, so that a go.mod still lacking something fails here.
			lc.modFile, lc.goMod = res.Modules.ModFile, res.Modules.ModFile
		}
	} else {
		lc.goMod = opts.ModFile
	}
	// What the go command leaves when a signal stops it goes with tmp.
	if lc.tmp, err = gocmd.TempDir(); err != nil {
		return nil, err
	}
	defer os.RemoveAll(lc.tmp)
	pkgs, err := load(ctx, lc, nil, paths)
	if err != nil {
		return nil, err
	}
	if overlay := out.overlay(res.Path); overlay != nil && anyCycle(pkgs) {
		// The existing registry file may be what closes the cycle; load
		// again without it (an overlay costs the go command time, so
		// only when needed).
		if pkgs, err = load(ctx, lc, overlay, paths); err != nil {
			return nil, err
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	res.Entries = checkEntries(&errs, m, pkgs, out, relativeTo(cwd))
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// checkEntries checks every entry of m against its loaded package and
// returns those that pass; out is the package the registry goes into, nil
// when it could not be inspected.
func checkEntries(errs *diag.List, m *manifest.Manifest, pkgs map[string]*loadedPackage, out *outputPackage, rel func(string) string) []*Entry {
	var entries []*Entry
	for i, c := range m.Connectors {
		if out != nil && out.path != "" && c.Import.V == out.path {
			errs.Add(c.Import.Pos, "%s: %s is the package the registry is generated into, and a package cannot import itself; move the connector to its own package, or generate the registry elsewhere with output:", c.Label(i), c.Import.V)
			continue
		}
		if e := checkEntry(errs, c, i, pkgs[c.Import.V], rel); e != nil {
			entries = append(entries, e)
		}
	}
	return entries
}

// Docs fills in each entry's package documentation summary; only listings
// need it, so Resolve leaves it out.
func (r *Result) Docs() {
	for _, e := range r.Entries {
		e.Doc = packageDoc(e.files)
	}
}

// Stale reports whether the file at r.Path differs from r.Content, and
// returns a unified diff of the difference.
func (r *Result) Stale() (bool, []byte, error) {
	old, err := os.ReadFile(r.Path)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	if bytes.Equal(old, r.Content) {
		return false, nil, nil
	}
	return true, unifiedDiff(r.Path, old, r.Content), nil
}

// loadConfig says how the go command loads the connectors' packages.
type loadConfig struct {
	dir  string
	tags []string
	// goMod is the go.mod file in effect: the main module's, or modFile.
	goMod string
	// modFile is a go.mod to use instead of the main module's; modMod
	// lets the go command complete it while loading.
	modFile string
	modMod  bool
	// tmp is the go command's GOTMPDIR: a go command stopped by a signal
	// leaves its work directory there, and kvgen removes tmp.
	tmp string
}

// env is the go command's environment for loading.
func (lc loadConfig) env() []string {
	var env []string
	if lc.modFile != "" {
		env = gomod.Env()
	}
	if lc.tmp != "" {
		env = gocmd.WithTempDir(env, lc.tmp)
	}
	return env
}

// buildFlags are the go command flags that loading needs.
func (lc loadConfig) buildFlags() []string {
	var flags []string
	if len(lc.tags) > 0 {
		flags = append(flags, "-tags="+strings.Join(lc.tags, ","))
	}
	if lc.modFile != "" {
		flags = append(flags, "-modfile="+lc.modFile)
	}
	if lc.modMod {
		// The temporary go.mod of a deployment build may lack requirements
		// that the connectors' modules bring; the go command adds them
		// there, never to the user's go.mod.
		flags = append(flags, "-mod=mod")
	}
	return flags
}
