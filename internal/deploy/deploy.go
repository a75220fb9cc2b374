// Package deploy makes custom deployment builds: a binary linked with the
// connectors of one manifest, or of several, built without touching the
// working tree.
//
// The registry for the manifest is generated into a temporary -overlay that
// stands in for the package's generated file (with several manifests, each
// for its output: file), and the modules the manifest names are added to a
// temporary copy of go.mod used through -modfile, so go.mod, go.sum and the
// committed registry stay as they are.
//
// It serves build systems that make a deployment's binaries themselves,
// as kvgen build does.
package deploy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"go/build"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/gofiles"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/pipeline"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Options says what to build.
type Options struct {
	// WorkDir is the main module's directory, where the go commands run;
	// it must be absolute.
	WorkDir string
	// Env is the go commands' environment, such as os.Environ().
	Env []string
	// Manifest is the deployment manifest, relative to WorkDir. Its
	// registry stands in for the kvgen-generated file of Package, which
	// it need not have written: a deployment may link other connectors
	// than the committed registry does.
	Manifest string
	// Manifests, in place of Manifest, are several manifests whose
	// registries one build links, as a program with a registry per
	// contract has them: each stands in for the file its output: key
	// names, the file kvgen generate writes for it. Their packages are
	// loaded in one go list run (see pipeline.Together), and their modules
	// must be those go.mod already requires: kvgen generate links them.
	Manifests []string
	// Tags are build tags, for loading the connectors' packages and for
	// go build.
	Tags []string
	// ReadOnlyModules and Cache are as for kvgen generate (see
	// pipeline.Options).
	ReadOnlyModules bool
	Cache           *pipeline.Cache
	// Only keeps the manifest's entries of those names, as ForConfig
	// does; give one of the two.
	Only []string
	// Binary is the binary to write. {os}, {arch} and {exe} in it stand
	// for each target's GOOS, GOARCH, and .exe on Windows.
	Binary string
	// Targets are the platforms to build for, a binary each; none means
	// the one the go command builds for with Env (GOOS and GOARCH there,
	// else in the go env file, else the host's), which {os} and {arch}
	// then name. Each must be one go tool dist list lists, and several
	// must name their binaries apart in Binary.
	Targets []Target
	// ForConfig, when set, is a config, such as a --kv-transfer-config,
	// that says which entries to link: only those it selects are, by the
	// rule the contract declares in its //kvgen:select line (for KV, the
	// connector it names and, for a MultiConnector, its children), and
	// each must be in the manifest. A contract without the rule is an
	// error that wraps ErrNoSelect. ForFile names the config in messages;
	// "" for one given inline.
	ForConfig []byte
	ForFile   string
	// Package is the main package to build, as the go command takes it.
	Package string
	// LDFlags is passed to go build.
	LDFlags string
	// Verbose shows the go commands as they run.
	Verbose bool
	// Progress, when set, is told of each step of the build as it starts
	// and as it ends, one line of text each ("compiling ./cmd/server",
	// "compiling ./cmd/server: done in 1.2s"), for the caller to show,
	// of the connectors ForConfig keeps ("linking what dc.json creates:
	// filesystem, redis, MultiConnector", in the manifest's order), and of
	// the registry's warnings (see pipeline.Result.Warnings).
	Progress func(string)
	// GoOutput receives what the go commands print, under Verbose.
	GoOutput io.Writer
	// Built, when set, is told of each binary once it is written: its
	// target and its path, Binary with the target's {os}, {arch} and
	// {exe} filled in.
	Built func(t Target, binary string)
}

// OptionError is a problem with what one of Options' fields gives; a
// command shows it under its own name for that field (see In).
type OptionError struct {
	// Field is the field: "Binary", "Targets" or "ForConfig".
	Field string
	// Value is what the field gave, as messages show it: the binary's
	// pattern, a target, the config's file.
	Value string
	Err   error
}

// Error says what is wrong, naming the field.
func (e *OptionError) Error() string { return e.In("Options." + e.Field).Error() }

// In is the error said of what, such as the command-line flag that set
// the field, instead of the field; it wraps Err.
func (e *OptionError) In(what string) error {
	if e.Value == "" { // a config given inline, say
		return fmt.Errorf("%s: %w", what, e.Err)
	}
	return fmt.Errorf("%s %s: %w", what, suggest.Show(e.Value), e.Err)
}

// Unwrap returns e.Err.
func (e *OptionError) Unwrap() error { return e.Err }

// Build builds opts.Package with the manifest's connectors. The registry
// comes from one run of gen's stages, the same as kvgen generate: the
// manifest is read once, and the go.mod that run linked is the one the
// build uses.
func Build(ctx context.Context, opts Options) error {
	if opts.Progress == nil {
		opts.Progress = func(string) {}
	}
	if opts.GoOutput == nil {
		opts.GoOutput = io.Discard
	}
	if err := opts.check(); err != nil {
		return err
	}
	// A deployment build never changes go.mod or go.sum, whatever GOFLAGS
	// says: what it links goes into a temporary copy. The go command says
	// which target it builds for when none is named: {os} and {arch}
	// name that one.
	ports, env, err := goPorts(ctx, opts.WorkDir, opts.Env)
	if err != nil {
		return err
	}
	opts.Env = env
	if opts.ForConfig != nil {
		m, err := manifest.LoadIn(opts.WorkDir, opts.Manifest)
		if m == nil {
			return err
		}
		// The contract says how a config selects entries, in a marker
		// read from its package's source.
		c, err := pipeline.ReadMarkers(ctx, opts.genOptions(), m.Factory.V)
		if err != nil {
			return err
		}
		if opts.Only, err = entriesFor(m, c, opts.ForConfig); err != nil {
			return &OptionError{Field: "ForConfig", Value: opts.ForFile, Err: err}
		}
		// Which entries that keeps, as the registry will list them.
		var kept []string
		for _, c := range m.Entries {
			if slices.ContainsFunc(opts.Only, c.HasName) {
				kept = append(kept, c.Name.V)
			}
		}
		opts.Progress(fmt.Sprintf("linking what %s creates: %s", cmp.Or(opts.ForFile, "the config"), strings.Join(kept, ", ")))
	}
	// The go command says which targets there are.
	targets := opts.Targets
	if len(targets) == 0 {
		targets = []Target{ports.host}
	}
	if err := ports.load(ctx, opts.WorkDir, opts.Env, targets); err != nil {
		return err
	}
	if len(opts.Targets) == 0 {
		if err := ports.check(ports.host); err != nil {
			return fmt.Errorf("GOOS=%s GOARCH=%s, from the environment or the go env file: %w", suggest.Show(ports.host.GOOS), suggest.Show(ports.host.GOARCH), err)
		}
	}
	for _, t := range targets {
		if err := ports.check(t); err != nil {
			return &OptionError{Field: "Targets", Value: t.String(), Err: err}
		}
	}
	outs, err := outputs(opts.WorkDir, opts.Binary, targets)
	if err != nil {
		return err
	}
	for i, t := range targets {
		b := &builder{opts: opts, gen: opts.genOptions(), output: outs[i], env0: t.env(opts.Env)}
		if len(opts.Targets) > 0 {
			b.prefix = t.String() + ": "
		}
		if err := b.run(ctx); err != nil {
			return err
		}
		if opts.Built != nil {
			opts.Built(t, outs[i])
		}
	}
	return nil
}

// check refuses options that Build cannot honour, before it runs anything.
func (o Options) check() error {
	switch {
	case !filepath.IsAbs(o.WorkDir):
		return fmt.Errorf("deploy: Options.WorkDir must be an absolute directory, got %q", o.WorkDir)
	case o.Env == nil:
		return errors.New("deploy: Options.Env is nil; give the go commands an environment, such as os.Environ()")
	case o.Only != nil && o.ForConfig != nil:
		return errors.New("deploy: Options.Only and ForConfig both say which connectors to link; give one")
	case o.Manifest != "" && o.Manifests != nil:
		return errors.New("deploy: Options.Manifest and Manifests both name what to link; give one")
	case o.Manifests != nil && (o.Only != nil || o.ForConfig != nil):
		// Entries' names are a manifest's own: another may use them too.
		return &OptionError{Field: "Manifests", Value: strings.Join(o.Manifests, ", "), Err: errors.New("a config or a list of names selects from one manifest; build with that manifest alone")}
	}
	return nil
}

// genOptions are the options the registry is generated with: the
// output, the package's kvgen-generated file, is the builder's to set, and
// the go command loads from WorkDir with -trimpath, as the compile step
// builds, so that the connectors and the standard library are compiled
// once. The registry goes into an overlay, so that on an unchanged tree
// of pinned modules the warm path hands back the file the last build
// rendered, and the build costs what go build costs.
func (o Options) genOptions() pipeline.Options {
	return pipeline.Options{
		WorkDir: o.WorkDir, Env: o.Env, Manifest: o.Manifest, Tags: o.Tags,
		ReadOnlyModules: o.ReadOnlyModules, Cache: o.Cache, Only: o.Only,
		Dir: ".", TrimPath: true, Warm: true, ForOverlay: true,
	}
}

// run builds one target's binary.
func (b *builder) run(ctx context.Context) error {
	var err error
	if b.tmp, err = gocmd.TempDir(b.env0); err != nil {
		return err
	}
	defer os.RemoveAll(b.tmp)
	// The go commands' work directories go in the scratch directory too:
	// one that a signal stopped cannot remove its own.
	b.goTmp = filepath.Join(b.tmp, "go")
	if err := os.Mkdir(b.goTmp, 0o700); err != nil {
		return err
	}
	if err := b.step("generating the registry", b.generate, ctx); err != nil {
		return err
	}
	return b.step("compiling "+b.opts.Package, b.compile, ctx)
}

type builder struct {
	opts   Options
	gen    pipeline.Options   // how the registry is generated
	output string             // the binary, for this target
	env0   []string           // the go commands' environment, for this target
	prefix string             // what progress lines start with: the target, if named
	regs   []*pipeline.Result // the registries, a manifest's each
	tmp    string             // scratch directory: go.mod, go.sum, overlay
	goTmp  string             // the go commands' GOTMPDIR, inside tmp
	flags  []string           // go build's flags for the registry: overlay, go.mod, tags
}

func (b *builder) step(name string, f func(context.Context) error, ctx context.Context) error {
	start := time.Now()
	b.opts.Progress(b.prefix + name)
	err := f(ctx)
	if err == nil {
		b.opts.Progress(fmt.Sprintf("%s%s: done in %s", b.prefix, name, time.Since(start).Round(time.Millisecond)))
	}
	return err
}

// generate runs gen's stages for the manifest, with the package's
// kvgen-generated file as the output, and puts what they produced in the
// scratch directory: the registry in an overlay that stands in for that
// file, and, when go.mod lacks what the manifest names, the linked go.mod
// and go.sum. The working tree is not written.
func (b *builder) generate(ctx context.Context) error {
	opts := b.gen
	opts.Env = b.env0
	if b.opts.Manifests == nil {
		target, err := b.generatedFile(ctx)
		if err != nil {
			return err
		}
		opts.Output = target
		res, err := pipeline.Generate(ctx, opts)
		if err != nil {
			return err
		}
		b.regs = []*pipeline.Result{res}
	} else if err := b.generateEach(ctx, opts); err != nil {
		return err
	}
	for _, r := range b.regs {
		for _, w := range r.Warnings {
			b.opts.Progress(b.prefix + w.Error())
		}
		if b.opts.Verbose {
			for _, c := range r.ModuleChanges() {
				b.opts.Progress(fmt.Sprintf("%stemporary go.mod: %s", b.prefix, c))
			}
		}
	}
	var err error
	b.flags, err = pipeline.Overlay(b.tmp, b.regs...)
	return err
}

// generateEach generates the registry of each of Options.Manifests, at
// its own output, with one package load. A manifest whose modules go.mod
// lacks is an error: linking them is kvgen generate's, into the files the
// program is built from.
func (b *builder) generateEach(ctx context.Context, opts pipeline.Options) error {
	opts = pipeline.Together(opts, b.opts.Manifests)
	var lacking []string
	for i, m := range b.opts.Manifests {
		opts.Manifest = m
		res, err := pipeline.Generate(ctx, opts)
		if err != nil {
			return err
		}
		if j := slices.IndexFunc(b.regs, func(r *pipeline.Result) bool { return r.Path == res.Path }); j >= 0 {
			return fmt.Errorf("%s and %s both generate %s, and one file holds one registry: give one of them", b.opts.Manifests[j], b.opts.Manifests[i], res.Path)
		}
		// The registry stands in for a file the program compiles, as the
		// one of a single manifest does: an output: that names no file
		// kvgen generated would add a registry nothing links.
		if ok, err := gen.IsGenerated(b.abs(res.Path)); err != nil || !ok {
			return fmt.Errorf("%s: %s is no file kvgen generated for the build to stand in for; run go tool kvgen generate -manifest %s first", m, res.Path, m)
		}
		if len(res.ModuleChanges()) > 0 {
			lacking = append(lacking, m)
		}
		b.regs = append(b.regs, res)
	}
	if lacking != nil {
		return fmt.Errorf("go.mod lacks modules that %s names; a build of several manifests links what go.mod requires: run go tool kvgen generate -manifest %s first", strings.Join(lacking, " and "), strings.Join(lacking, " -manifest "))
	}
	return nil
}

// generatedFile finds the kvgen-generated file among the package's files,
// or, when it has none, the manifest's own output: (manifestOutput).
func (b *builder) generatedFile(ctx context.Context) (string, error) {
	files, err := b.packageFiles(ctx)
	if err != nil {
		return "", err
	}
	var found []string
	for _, name := range files {
		if ok, err := gen.IsGenerated(name); err != nil {
			return "", err
		} else if ok {
			found = append(found, name)
		}
	}
	switch len(found) {
	case 0:
		// A program with a registry per contract keeps them in packages
		// of their own: the manifest's own output:, if kvgen generated
		// it, is the file to stand in for.
		if own := b.manifestOutput(); own != "" {
			return own, nil
		}
		return "", fmt.Errorf("%s has no file generated by kvgen for the overlay to replace; run go generate there first", suggest.Show(b.opts.Package))
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s has %d files generated by kvgen (%s); keep one", suggest.Show(b.opts.Package), len(found), strings.Join(found, ", "))
}

// manifestOutput is the file the manifest's output: names, as kvgen
// generate writes it, when kvgen generated it; else "".
func (b *builder) manifestOutput() string {
	m, _ := manifest.LoadIn(b.opts.WorkDir, b.opts.Manifest)
	if m == nil || m.Output.V == "" {
		return ""
	}
	own := b.abs(filepath.Join(filepath.Dir(b.opts.Manifest), m.Output.V))
	if ok, err := gen.IsGenerated(own); err != nil || !ok {
		return ""
	}
	return own
}

// packageFiles lists the package's Go files. A package named by its
// directory, the usual case, is read directly; that spares a go command run.
func (b *builder) packageFiles(ctx context.Context) ([]string, error) {
	if p := b.opts.Package; build.IsLocalImport(p) || filepath.IsAbs(p) {
		if !strings.Contains(p, "...") {
			return goFilesIn(b.abs(p))
		}
	}
	cfg := &packages.Config{
		Context:    ctx,
		Dir:        b.opts.WorkDir,
		Mode:       packages.NeedName | packages.NeedFiles,
		BuildFlags: b.gen.BuildFlags(),
		Env:        b.env(),
	}
	if err := gocmd.CheckModuleFiles(cfg.Dir, cfg.Env); err != nil {
		return nil, err
	}
	pkgs, err := packages.Load(cfg, b.opts.Package)
	if err != nil {
		return nil, err
	}
	if len(pkgs) != 1 {
		return nil, fmt.Errorf("%s matches %d packages; name one main package", suggest.Show(b.opts.Package), len(pkgs))
	}
	p := pkgs[0]
	if len(p.Errors) > 0 && len(p.GoFiles) == 0 {
		return nil, fmt.Errorf("%s: %s", suggest.Show(b.opts.Package), p.Errors[0].Msg)
	}
	return append(p.GoFiles, p.IgnoredFiles...), nil
}

// abs returns path made absolute against the working directory.
func (b *builder) abs(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(b.opts.WorkDir, path)
}

// goFilesIn lists the non-test Go files in dir, an absolute directory.
func goFilesIn(dir string) ([]string, error) {
	src, _, err := gofiles.In(dir)
	for i, n := range src {
		src[i] = filepath.Join(dir, n)
	}
	return src, err
}

// env is the go commands' environment: outside workspace mode with a
// temporary go.mod, which the go command refuses in it.
func (b *builder) env() []string {
	env := b.env0
	if slices.ContainsFunc(b.regs, func(r *pipeline.Result) bool { return r.ModuleChanges() != nil }) {
		env = gocmd.WithoutWorkspace(env)
	}
	return gocmd.WithTempDir(env, b.goTmp)
}

func (b *builder) compile(ctx context.Context) error {
	out := b.abs(b.output)
	args := append([]string{"build", "-o", out}, b.flags...)
	if b.opts.LDFlags != "" {
		args = append(args, "-ldflags="+b.opts.LDFlags)
	}
	if b.opts.Verbose {
		args = append(args, "-v")
	}
	_, err := b.goOutput(ctx, b.opts.WorkDir, append(args, b.opts.Package)...)
	return err
}

// goOutput runs the go command and returns its standard output. Its
// standard error is passed on; on failure, the lines that name a
// manifest entry's package or module get that entry's position.
func (b *builder) goOutput(ctx context.Context, dir string, args ...string) (string, error) {
	if b.opts.Verbose {
		b.opts.Progress("go " + strings.Join(args, " "))
	}
	stdout, stderr, err := gocmd.Run(ctx, dir, b.env(), args...)
	if err == nil {
		if b.opts.Verbose {
			b.opts.GoOutput.Write(stderr)
		}
		return string(stdout), nil
	}
	out := string(stderr)
	var ge *gocmd.Error
	if errors.As(err, &ge) {
		// The go command's words follow, annotated, without the scratch
		// go.mod's name.
		err, out = ge.Err, ge.Stderr
	}
	return "", &GoError{Verb: args[0], Err: err, Output: b.annotate(out)}
}

// GoError is a go command run that failed, such as the build of a
// deployment's program, with what the go command said: a compiler's
// errors, one a line, each that names a manifest entry's package or
// module placed at that entry.
type GoError struct {
	// Verb is the go command's: "build".
	Verb string
	// Err is how the run ended: "exit status 1".
	Err error
	// Output is what it wrote to standard error.
	Output string
}

// Error is the run and how it ended, then the go command's lines.
func (e *GoError) Error() string { return fmt.Sprintf("go %s: %v\n%s", e.Verb, e.Err, e.Output) }

// Unwrap returns how the run ended.
func (e *GoError) Unwrap() error { return e.Err }

// annotate places each line of out that names an entry's package or
// module at that entry, in whichever registry lists it.
func (b *builder) annotate(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, line := range lines {
		for _, r := range b.regs {
			if a := r.Annotate(line); a != line {
				lines[i] = a
				break
			}
		}
	}
	return strings.Join(lines, "\n")
}
