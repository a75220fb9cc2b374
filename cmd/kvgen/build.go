package main

import (
	"context"
	"os"

	"github.com/kvgen/kvgen/gen/deploy"
)

func runBuild(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "build", "-manifest FILE -o BINARY [-tags TAGS] [-ldflags FLAGS] [-v] [-json] PACKAGE")
	var opts deploy.Options
	var tags string
	fs.StringVar(&opts.Manifest, "manifest", "", "the deployment manifest (required)")
	fs.StringVar(&opts.Output, "o", "", "the binary to write (required)")
	fs.StringVar(&tags, "tags", "", "comma-separated build tags")
	fs.StringVar(&opts.LDFlags, "ldflags", "", "flags for the linker, as go build takes them")
	fs.BoolVar(&opts.Verbose, "v", false, "show the go commands and what they print")
	e.jsonFlag(fs)
	pkgs, code := parseMixed(fs, args)
	if code >= 0 {
		return code
	}
	switch {
	case opts.Manifest == "" || opts.Output == "":
		e.errorf("build: -manifest and -o are required")
		fs.Usage()
		return exitUsage
	case len(pkgs) != 1:
		e.errorf("build: want one PACKAGE, got %d: %q", len(pkgs), pkgs)
		fs.Usage()
		return exitUsage
	}
	opts.Package = pkgs[0]
	opts.Tags = splitTags(tags)
	opts.WorkDir, opts.Env = workDir(), os.Environ()
	opts.Log = e.stderr
	opts.CacheDir = cacheDir()
	if err := deploy.Build(ctx, opts); err != nil {
		e.report(err)
		return exitError
	}
	return exitOK
}
