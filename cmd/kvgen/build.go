package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"

	"github.com/kvgen/kvgen/internal/deploy"
	"github.com/kvgen/kvgen/internal/imagebuild"
	"github.com/kvgen/kvgen/internal/readfile"
)

// targetsFlag collects -target GOOS/GOARCH, repeated or comma-separated
// as in -target linux/amd64,linux/arm64, or -target all.
type targetsFlag struct {
	list []deploy.Target
	// all is -target all: with -image, every Linux target the go command
	// builds for (see imagebuild.Image's AllTargets).
	all bool
}

func (t *targetsFlag) String() string {
	if t.all {
		return "all"
	}
	var s []string
	for _, x := range t.list {
		s = append(s, x.String())
	}
	return strings.Join(s, ",")
}

func (t *targetsFlag) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part == "all" {
			t.all = true
			continue
		}
		x, err := deploy.ParseTarget(part)
		if err != nil {
			return err
		}
		t.list = append(t.list, x)
	}
	if t.all && len(t.list) > 0 {
		return errors.New("all names every target; give it alone")
	}
	return nil
}

// maxConfig bounds a -for config file; a real one is a few hundred bytes.
const maxConfig = 1 << 20

func runBuild(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "build", "-manifest FILE... -o BINARY [-target GOOS/GOARCH,...] [-for CONFIG.json|JSON] [-tags TAGS] [-ldflags FLAGS] [-v] [-json] PACKAGE\n       kvgen build -manifest FILE... -image REF [-o BINARY] [-target linux/ARCH,...|all] [-base REF] [-ca-bundle FILE] [-image-label KEY=VALUE ...] [-insecure] ... PACKAGE")
	var opts deploy.Options
	var tags string
	var targets targetsFlag
	var img imageFlags
	img.register(fs)
	var manifests manifestList
	fs.Var(&manifests, "manifest", "the deployment manifest `FILE` (required), whose registry stands in for PACKAGE's kvgen-generated file; give it more than once to link several registries, each standing in for its output: file")
	fs.StringVar(&opts.Binary, "o", "", "the binary to write (required); {os}, {arch} and {exe} (.exe on Windows) stand for each target's")
	fs.Var(&targets, "target", "a GOOS/GOARCH to build for, such as darwin/arm64; repeat it or separate several with commas for several binaries; with -image, all for every Linux target (default: GOOS and GOARCH of the environment, else this machine)")
	fs.StringVar(&opts.ForFile, "for", "", "a config JSON file, or the JSON itself, such as a --kv-transfer-config: link only the entries it selects, by the contract's //kvgen:select rule")
	fs.StringVar(&tags, "tags", "", "comma-separated build tags")
	fs.StringVar(&opts.LDFlags, "ldflags", "", "flags for the linker, as go build takes them")
	fs.BoolVar(&opts.Verbose, "v", false, "show the go commands and what they print")
	e.jsonFlag(fs, "{binaries, image, problems} (image with -image)")
	pkgs, code := parseMixed(e, fs, args)
	if code >= 0 {
		return code
	}
	switch {
	case len(manifests) == 0 || (opts.Binary == "" && img.ref == ""):
		return usageErrorf(e, fs, "build: -manifest and -o (or -image) are required")
	case len(pkgs) != 1:
		return usageErrorf(e, fs, "build: want one PACKAGE, got %d: %q", len(pkgs), pkgs)
	case len(manifests) > 1 && opts.ForFile != "":
		return usageErrorf(e, fs, "-for selects from one manifest; give one -manifest with it")
	case targets.all && img.ref == "":
		// go tool dist list has ports no server runs on (js/wasm,
		// wasip1/wasm) and ports that do not build without cgo and an
		// SDK (ios, most of android): all of them is no deployment.
		return usageErrorf(e, fs, "-target all is for -image, where it is every Linux target; without -image, name the targets, as in -target linux/amd64,darwin/arm64")
	}
	if code := readFor(e, fs, &opts); code >= 0 {
		return code
	}
	if len(manifests) == 1 {
		opts.Manifest = manifests[0]
	} else {
		opts.Manifests = manifests
	}
	opts.Package = pkgs[0]
	opts.Targets = targets.list
	img.allTargets = targets.all
	opts.Tags = splitTags(tags)
	opts.WorkDir, opts.Env = workDir(), os.Environ()
	opts.Progress = func(line string) { e.notef("%s", line) }
	opts.GoOutput = e.stderr
	opts.Cache = e.cache
	built := []builtBinary{}
	e.json.set("binaries", built)
	opts.Built = func(t deploy.Target, binary string) {
		built = append(built, builtBinary{binary, t.String()})
		e.json.set("binaries", built)
	}
	if img.ref != "" {
		return img.build(ctx, e, opts)
	}
	if err := deploy.Build(ctx, opts); err != nil {
		return buildFailed(e, err)
	}
	return exitOK
}

// readFor sets opts.ForConfig to what -for gives: the config's file, read,
// or the config itself. It returns the exit code of a -for that is wrong,
// else -1.
func readFor(e *env, fs *flag.FlagSet, opts *deploy.Options) int {
	forGiven := false
	fs.Visit(func(f *flag.Flag) { forGiven = forGiven || f.Name == "for" })
	switch value := opts.ForFile; {
	case forGiven && strings.TrimSpace(value) == "":
		// -for "$CONFIG" with CONFIG unset would link every entry.
		return usageErrorf(e, fs, "-for is empty; give a config's file or its JSON")
	case strings.HasPrefix(strings.TrimSpace(value), "{") && !exists(value):
		// The config itself, as vLLM's --kv-transfer-config takes it;
		// a file of that name, should there be one, is read instead.
		if len(value) > maxConfig {
			e.errorf("-for: the config is %d bytes, more than %d", len(value), maxConfig)
			return exitUsage
		}
		opts.ForConfig, opts.ForFile = []byte(value), ""
	case value != "":
		data, err := readfile.Read(opts.ForFile, maxConfig)
		if err != nil {
			e.errorf("-for: %v", err)
			return exitUsage
		}
		opts.ForConfig = data
	}
	return -1
}

// builtBinary is a binary as `kvgen build -json` reports it.
type builtBinary struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// buildFailed reports why deploy.Build or imagebuild.Build failed and
// returns the exit code: a target or a binary path deploy.Build refuses,
// -for with a contract that declares no rule for reading a config, and
// what imagebuild.Build says an image cannot be, is a usage error, since
// the command line gave it; a -for config that names what the manifest
// lacks is a problem in a file, as the manifest's own are.
func buildFailed(e *env, err error) int {
	e.report(buildFlagged(err))
	var oe *deploy.OptionError
	if errors.As(err, &oe) && (oe.Field == "Targets" || oe.Field == "Binary" || errors.Is(oe.Err, deploy.ErrNoSelect)) {
		return exitUsage
	}
	if errors.As(err, new(*imagebuild.UsageError)) {
		return exitUsage
	}
	return exitError
}

// buildFlagged words a problem with one of deploy.Options' fields as a
// problem with the flag that set it.
func buildFlagged(err error) error {
	var oe *deploy.OptionError
	if !errors.As(err, &oe) {
		return err
	}
	flag, ok := map[string]string{"Binary": "-o", "Targets": "-target", "ForConfig": "-for"}[oe.Field]
	if !ok {
		return err
	}
	return oe.In(flag)
}

// exists reports whether a file of that name is there.
func exists(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}
