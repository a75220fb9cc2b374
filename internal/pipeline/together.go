package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/readfile"
)

// Several manifests generated in one run share their package load: the
// first run that loads lists every manifest's packages, and their
// contracts', in one go list run, and the runs after it take their
// packages from it. A go list run costs its process, the module graph and
// the standard library's listing whatever it lists, so a collector's five
// kinds of component cost about one load, not five.
//
// Sharing changes no result. A run takes the shared listing only when it
// would have loaded the same way (in the same module and workspace, with
// the same flags and environment, its overlay within the shared one), when every package it
// asks for listed without a problem, and when go.mod and go.sum are as
// they were at the shared load (a run before it may have linked modules
// into them); otherwise it loads on its own, as a run of one manifest
// does, so that its problems are its own load's.

// together is the package load that the runs of one Options share (see
// Together).
type together struct {
	manifests []string
	dir       string // Options.Dir as the caller gave it

	mu      sync.Mutex
	done    bool // the shared load was tried
	lc      load.Config
	overlay map[string][]byte
	paths   []string // every manifest's packages, and their contracts'
	listed  *load.Listed
	modules [sha256.Size]byte // go.mod and go.sum at the load

	env goEnvAnswer // the first run's go env, which the runs after it share
}

// goEnvAnswer is what one go env run answered a run's withDefaults: the
// environment it was asked in, and what it gave back.
type goEnvAnswer struct {
	dir        string
	in, keys   []string
	out, value []string
}

// Together returns opts for runs over each of manifests (Options.Manifest
// set to each in turn) that share one package load: the first run that
// loads lists every manifest's packages, and the runs after it read theirs
// from that listing instead of running go list again. The results are
// those of runs on their own.
func Together(opts Options, manifests []string) Options {
	if len(manifests) > 1 {
		opts.together = &together{manifests: slices.Clone(manifests), dir: opts.Dir}
	}
	return opts
}

// goEnv is gocmd.ReadOnlyModulesEnv(ctx, opts.WorkDir, opts.Env, keys...),
// run once for the runs of t that ask it alike: each go command run costs
// a few milliseconds, and nothing a run does (linking modules into go.mod)
// changes its answer.
func (t *together) goEnv(ctx context.Context, opts Options, keys []string) ([]string, []string, error) {
	if t == nil {
		return gocmd.ReadOnlyModulesEnv(ctx, opts.WorkDir, opts.Env, keys...)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	a := &t.env
	if a.out == nil || a.dir != opts.WorkDir || !slices.Equal(a.in, opts.Env) || !slices.Equal(a.keys, keys) {
		out, values, err := gocmd.ReadOnlyModulesEnv(ctx, opts.WorkDir, opts.Env, keys...)
		if err != nil {
			return nil, nil, err
		}
		*a = goEnvAnswer{dir: opts.WorkDir, in: slices.Clone(opts.Env), keys: slices.Clone(keys), out: out, value: values}
	}
	return slices.Clip(a.out), slices.Clone(a.value), nil
}

// listing returns the listing of paths from the shared load, which the
// first call makes, or nil when the run is to load on its own. opts is the
// run's, lc, overlay and paths what it would load with.
func (t *together) listing(ctx context.Context, opts Options, lc load.Config, overlay map[string][]byte, paths []string) *load.Listing {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.done {
		t.done = true
		t.load(ctx, opts, lc)
	}
	if t.listed == nil || !t.covers(lc, overlay, paths) || t.modulesSum() != t.modules {
		return nil
	}
	listed, err := t.listed.Listing(ctx, lc, paths)
	if err != nil || len(listed.Missing) > 0 {
		return nil
	}
	for _, lp := range listed.Packages {
		if lp.Err != nil {
			return nil
		}
	}
	if c := listed.ContractPkg; lc.ContractPath != "" && (c == nil || len(c.Errors) > 0) {
		return nil
	}
	return listed
}

// shared returns, for link.Request.Shared, the listing of a run with opts
// from the shared load; nil when there is none.
func (t *together) shared(opts Options) func(context.Context, load.Config, map[string][]byte, []string) *load.Listing {
	if t == nil {
		return nil
	}
	return func(ctx context.Context, lc load.Config, overlay map[string][]byte, paths []string) *load.Listing {
		return t.listing(ctx, opts, lc, overlay, paths)
	}
}

// load lists, with lc, every package of the manifests that load in the
// module lc.Dir is in, as the run whose first load it stands for would.
func (t *together) load(ctx context.Context, opts Options, lc load.Config) {
	var paths []string
	overlay := map[string][]byte{}
	for _, name := range t.manifests {
		o := opts
		o.Manifest, o.Dir = name, t.dir
		var errs diag.List
		m, err := readManifest(&errs, o)
		if err != nil {
			continue
		}
		out := placeOutput(&errs, o, m)
		if o.Dir == "" {
			o.Dir = defaultLoadDir(o, out.abs)
		}
		if !sameModule(o.loadDir(), lc.Dir) {
			continue // a module of its own: its run loads alone
		}
		paths = append(paths, m.ImportPaths()...)
		if c := gen.ContractOf(m).Path; c != "" && c != load.RegistryPath {
			paths = append(paths, c)
		}
		maps.Copy(overlay, out.pkg.overlay(out.abs))
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	shared := lc
	shared.ContractPath = ""
	listed, err := load.List(ctx, shared, overlay, paths)
	if err != nil {
		return
	}
	t.lc, t.overlay, t.paths, t.listed = lc, overlay, paths, listed
	t.modules = t.modulesSum()
}

// sameModule reports whether the go command, run in the absolute
// directories a and b, lists import paths alike: one main module, and the
// same go.work or none.
func sameModule(a, b string) bool {
	root := gocmd.ModuleRoot(a)
	return root != "" && root == gocmd.ModuleRoot(b) && gocmd.WorkFile(a, nil) == gocmd.WorkFile(b, nil)
}

// covers reports whether a run that loads paths with lc and overlay would
// have listed them as the shared load did.
func (t *together) covers(lc load.Config, overlay map[string][]byte, paths []string) bool {
	if !sameModule(lc.Dir, t.lc.Dir) || !slices.Equal(lc.BuildFlags(), t.lc.BuildFlags()) || !slices.Equal(lc.Environ, t.lc.Environ) || lc.Deps && !t.lc.Deps {
		return false
	}
	for file, content := range overlay {
		if shared, ok := t.overlay[file]; !ok || !bytes.Equal(shared, content) {
			return false
		}
	}
	listed := func(p string) bool {
		_, found := slices.BinarySearch(t.paths, p)
		return found || p == "" || p == load.RegistryPath
	}
	return listed(lc.ContractPath) && !slices.ContainsFunc(paths, func(p string) bool { return !listed(p) })
}

// modulesSum is the hash of go.mod and go.sum of the main module the
// shared load ran in, as they are now.
func (t *together) modulesSum() [sha256.Size]byte {
	h := sha256.New()
	if goMod := t.listed.GoMod(); goMod != "" {
		for _, f := range []string{goMod, filepath.Join(filepath.Dir(goMod), "go.sum")} {
			data, err := readfile.Read(f, readfile.Max)
			if err != nil && !os.IsNotExist(err) {
				data = []byte{0} // unreadable: not the same as any content
			}
			h.Write(data)
			h.Write([]byte{0})
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
