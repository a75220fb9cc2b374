// Package deploy makes custom deployment builds: a binary linked with the
// connectors of one manifest, built without touching the working tree.
//
// The registry for the manifest is generated into a temporary -overlay that
// stands in for the package's generated file, and the modules the manifest
// names are added to a temporary copy of go.mod used through -modfile, so
// go.mod, go.sum and the committed registry stay as they are.
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/gen"
	"github.com/kvgen/kvgen/gen/diag"
	"github.com/kvgen/kvgen/gen/manifest"
)

// Options says what to build.
type Options struct {
	// Manifest is the deployment manifest.
	Manifest string
	// Output is the binary to write.
	Output string
	// Package is the main package to build, as the go command takes it.
	Package string
	// Tags and LDFlags are passed to go build.
	Tags    []string
	LDFlags string
	// Verbose shows the go commands as they run.
	Verbose bool
	// Log receives progress lines and the go command's output.
	Log io.Writer
}

// Build builds opts.Package with the manifest's connectors.
func Build(ctx context.Context, opts Options) error {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	b := &builder{opts: opts, modules: map[int]string{}}
	m, err := manifest.Load(opts.Manifest)
	if err != nil {
		return err
	}
	b.m = m
	if b.tmp, err = os.MkdirTemp("", "kvgen-build-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.tmp)
	if err := b.step("resolving modules", b.resolveModules, ctx); err != nil {
		return err
	}
	if err := b.step("generating the registry", b.generate, ctx); err != nil {
		return err
	}
	return b.step("compiling "+opts.Package, b.compile, ctx)
}

type builder struct {
	opts    Options
	m       *manifest.Manifest
	modRoot string         // directory of the main module's go.mod
	tmp     string         // scratch directory: go.mod, go.sum, overlay
	modFile string         // the temporary go.mod
	overlay string         // the overlay JSON file
	modules map[int]string // entry index -> module path, where known
}

func (b *builder) step(name string, f func(context.Context) error, ctx context.Context) error {
	start := time.Now()
	fmt.Fprintf(b.opts.Log, "kvgen: %s\n", name)
	err := f(ctx)
	if err == nil {
		fmt.Fprintf(b.opts.Log, "kvgen: %s: done in %s\n", name, time.Since(start).Round(time.Millisecond))
	}
	return err
}

// resolveModules writes the temporary go.mod: the main module's, plus a
// require and replace for each entry with a replace directory, then lets
// the go command add what those modules and the versioned entries need.
func (b *builder) resolveModules(ctx context.Context) error {
	gomod, err := b.goOutput(ctx, "", "env", "GOMOD")
	if err != nil {
		return err
	}
	gomod = strings.TrimSpace(gomod)
	if gomod == "" || gomod == os.DevNull {
		return errors.New("kvgen build runs inside a module: no go.mod found here")
	}
	b.modRoot = filepath.Dir(gomod)
	data, err := os.ReadFile(gomod)
	if err != nil {
		return err
	}
	mf, err := modfile.Parse(gomod, data, nil)
	if err != nil {
		return err
	}
	if mf.Module == nil {
		return fmt.Errorf("%s has no module line", gomod)
	}
	b.modFile = filepath.Join(b.tmp, "go.mod")

	var errs diag.List
	var get []string
	manifestDir := filepath.Dir(b.opts.Manifest)
	for i, c := range b.m.Connectors {
		switch {
		case c.Replace.Set:
			dir, err := filepath.Abs(filepath.Join(manifestDir, filepath.FromSlash(c.Replace.V)))
			if err != nil {
				return err
			}
			modPath, err := modulePath(dir)
			if err != nil {
				errs.Add(c.Replace.Pos, "%s: replace %s: %v", c.Label(i), c.Replace.V, err)
				continue
			}
			if modPath == mf.Module.Mod.Path {
				errs.Add(c.Replace.Pos, "%s: replace %s: that is the main module itself; drop replace:", c.Label(i), c.Replace.V)
				continue
			}
			if !inModule(c.Import.V, modPath) {
				errs.Add(c.Import.Pos, "%s: %s is not in module %s, which %s holds", c.Label(i), c.Import.V, modPath, c.Replace.V)
				continue
			}
			rel, err := filepath.Rel(b.modRoot, dir)
			if err != nil {
				return err
			}
			// Without a version, require the zero pseudo-version of the
			// module's major version: v2 modules need a v2 version.
			_, pathMajor, _ := module.SplitPathVersion(modPath)
			major := module.PathMajorPrefix(pathMajor)
			if major == "" {
				major = "v0"
			}
			version := module.ZeroPseudoVersion(major)
			if c.Version.Set {
				version = c.Version.V
			}
			// A relative replacement keeps machine paths out of the
			// binary's build info; the go command resolves it against
			// the module root, not against the temporary go.mod.
			target := "./" + filepath.ToSlash(rel)
			if err := mf.AddReplace(modPath, "", target, ""); err != nil {
				return err
			}
			if err := mf.AddRequire(modPath, version); err != nil {
				return err
			}
			b.modules[i] = modPath
		case c.Version.Set:
			get = append(get, c.Import.V+"@"+c.Version.V)
		}
	}
	if err := errs.Err(); err != nil {
		return err
	}
	mf.Cleanup()
	out, err := mf.Format()
	if err != nil {
		return err
	}
	if err := os.WriteFile(b.modFile, out, 0o644); err != nil {
		return err
	}
	if sum, err := os.ReadFile(filepath.Join(b.modRoot, "go.sum")); err == nil {
		if err := os.WriteFile(filepath.Join(b.tmp, "go.sum"), sum, 0o644); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(get) == 0 {
		return nil
	}
	// go get resolves each versioned import path to its module and adds
	// it, with what it requires, to the temporary go.mod and go.sum only.
	// Replaced modules need no go get: -mod=mod completes their
	// requirements while loading.
	_, err = b.goOutput(ctx, b.modRoot, append([]string{"get", "-modfile=" + b.modFile}, get...)...)
	return err
}

// modulePath reads the module path from the go.mod in dir.
func modulePath(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", errors.New("no go.mod there; replace names the directory of the connector's module")
		}
		return "", err
	}
	p := modfile.ModulePath(data)
	if p == "" {
		return "", errors.New("its go.mod has no module line")
	}
	return p, nil
}

func inModule(importPath, modPath string) bool {
	return importPath == modPath || strings.HasPrefix(importPath, modPath+"/")
}

var generatedHeader = regexp.MustCompile(`^// Code generated by kvgen from .* DO NOT EDIT\.$`)

// generate renders the registry for the manifest into the overlay, in
// place of the package's kvgen-generated file.
func (b *builder) generate(ctx context.Context) error {
	target, err := b.generatedFile(ctx)
	if err != nil {
		return err
	}
	res, err := gen.Generate(ctx, gen.Options{
		Manifest: b.opts.Manifest,
		Output:   target,
		Tags:     b.opts.Tags,
		ModFile:  b.modFile,
		Dir:      b.modRoot,
	})
	if err != nil {
		return err
	}
	file := filepath.Join(b.tmp, filepath.Base(target))
	if err := os.WriteFile(file, res.Content, 0o644); err != nil {
		return err
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {target: file}})
	if err != nil {
		return err
	}
	b.overlay = filepath.Join(b.tmp, "overlay.json")
	return os.WriteFile(b.overlay, overlay, 0o644)
}

// generatedFile finds the kvgen-generated file among the package's files.
func (b *builder) generatedFile(ctx context.Context) (string, error) {
	files, err := b.packageFiles(ctx)
	if err != nil {
		return "", err
	}
	var found []string
	for _, name := range files {
		if ok, err := isGenerated(name); err != nil {
			return "", err
		} else if ok {
			found = append(found, name)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%s has no file generated by kvgen for the overlay to replace; run go generate there first", b.opts.Package)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s has %d files generated by kvgen (%s); keep one", b.opts.Package, len(found), strings.Join(found, ", "))
}

// packageFiles lists the package's Go files. A package named by its
// directory, the usual case, is read directly; that spares a go command run.
func (b *builder) packageFiles(ctx context.Context) ([]string, error) {
	if p := b.opts.Package; build.IsLocalImport(p) || filepath.IsAbs(p) {
		if !strings.Contains(p, "...") {
			return goFilesIn(p)
		}
	}
	cfg := &packages.Config{
		Context:    ctx,
		Mode:       packages.NeedName | packages.NeedFiles,
		BuildFlags: b.buildFlags(),
		Env:        gen.ModFileEnv(),
	}
	pkgs, err := packages.Load(cfg, b.opts.Package)
	if err != nil {
		return nil, err
	}
	if len(pkgs) != 1 {
		return nil, fmt.Errorf("%s matches %d packages; name one main package", b.opts.Package, len(pkgs))
	}
	p := pkgs[0]
	if len(p.Errors) > 0 && len(p.GoFiles) == 0 {
		return nil, fmt.Errorf("%s: %s", b.opts.Package, p.Errors[0].Msg)
	}
	return append(p.GoFiles, p.IgnoredFiles...), nil
}

// goFilesIn lists the non-test Go files in dir.
func goFilesIn(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			abs, err := filepath.Abs(filepath.Join(dir, n))
			if err != nil {
				return nil, err
			}
			files = append(files, abs)
		}
	}
	return files, nil
}

func isGenerated(name string) (bool, error) {
	f, err := os.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	return s.Scan() && generatedHeader.MatchString(s.Text()), nil
}

func (b *builder) buildFlags() []string {
	flags := []string{"-modfile=" + b.modFile, "-mod=mod"}
	if len(b.opts.Tags) > 0 {
		flags = append(flags, "-tags="+strings.Join(b.opts.Tags, ","))
	}
	return flags
}

func (b *builder) compile(ctx context.Context) error {
	out, err := filepath.Abs(b.opts.Output)
	if err != nil {
		return err
	}
	args := append([]string{"build", "-trimpath", "-overlay=" + b.overlay, "-o", out}, b.buildFlags()...)
	if b.opts.LDFlags != "" {
		args = append(args, "-ldflags="+b.opts.LDFlags)
	}
	if b.opts.Verbose {
		args = append(args, "-v")
	}
	_, err = b.goOutput(ctx, "", append(args, b.opts.Package)...)
	return err
}

// goOutput runs the go command and returns its standard output. Its
// standard error is passed on; on failure, the lines that name a
// manifest entry's package or module get that entry's position.
func (b *builder) goOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = gen.ModFileEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if b.opts.Verbose {
		fmt.Fprintf(b.opts.Log, "kvgen: go %s\n", strings.Join(args, " "))
	}
	err := cmd.Run()
	if err == nil {
		if b.opts.Verbose {
			b.opts.Log.Write(stderr.Bytes())
		}
		return stdout.String(), nil
	}
	return "", fmt.Errorf("go %s: %w\n%s", args[0], err, b.annotate(stderr.String()))
}

// annotate prefixes each line of the go command's output that names an
// entry's import path or module with the entry's manifest position.
func (b *builder) annotate(out string) string {
	var lines []string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		best, bestIdx := "", -1
		for i, c := range b.m.Connectors {
			for _, p := range []string{c.Import.V, b.modules[i]} {
				if p != "" && len(p) > len(best) && mentions(line, p) {
					best, bestIdx = p, i
				}
			}
		}
		if bestIdx >= 0 {
			c := b.m.Connectors[bestIdx]
			line = fmt.Sprintf("%s: %s: %s", c.Import.Pos, c.Label(bestIdx), line)
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// mentions reports whether line names path as a whole path, not as the
// prefix of a longer one (github.com/x/foo in github.com/x/foobar).
func mentions(line, path string) bool {
	for i := 0; ; {
		j := strings.Index(line[i:], path)
		if j < 0 {
			return false
		}
		end := i + j + len(path)
		if end == len(line) || strings.ContainsRune("/@: \t\"'", rune(line[end])) {
			return true
		}
		i = end
	}
}
