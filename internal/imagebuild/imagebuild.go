// Package imagebuild builds a deployment as an OCI image, as kvgen build
// -image does. Before anything is built it decides what the image may
// be: Linux platforms only, one for a docker archive, a base that has
// each of them, and static binaries when there is no base. It then
// builds the binaries with deploy.Build and packages and writes them
// with ociimage.
package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kvgen/kvgen/internal/deploy"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/ociimage"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Image says what image to make of a deployment's binaries, and where it
// goes.
type Image struct {
	// Ref is where the image goes.
	Ref ociimage.Ref
	// AllTargets builds for every Linux target the go command builds
	// for, in place of deploy.Options.Targets.
	AllTargets bool
	// Options say how to package the binaries; Build sets Platforms, one
	// for each target.
	Options ociimage.Options
}

// UsageError is a problem with what the caller asked for, found before
// anything is built: a target that is not Linux, several for a docker
// archive, a registry that -insecure may not reach. Its message names
// kvgen build's flags, since that command is what asks; it reports the
// error as a usage error.
type UsageError struct{ Err error }

// Error is Err's message.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns e.Err.
func (e *UsageError) Unwrap() error { return e.Err }

func usagef(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// Build builds the deployment opts says, for each of its targets, and
// packages the binaries as img says; it returns the digest of the image
// written, or of the index over several. With no opts.Binary, the
// binaries go into a temporary directory and are removed. What the
// image cannot be is a *UsageError, returned before anything is built;
// deploy.Build's errors are returned as they are, and the others name
// the image.
func Build(ctx context.Context, opts deploy.Options, img Image) (string, error) {
	if opts.Progress == nil {
		opts.Progress = func(string) {}
	}
	opts, err := plan(ctx, opts, img)
	if err != nil {
		return "", err
	}
	if opts.Binary == "" {
		tmp, err := tempBinaries(&opts)
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
	}
	if err := deploy.Build(ctx, opts); err != nil {
		return "", err
	}
	return pack(ctx, opts, img)
}

// plan applies the rules of what an image may be to opts, before
// anything is built, since each build may take minutes: it returns the
// options to build with, whose targets are each Linux, and whose
// environment, when there is no base, builds static binaries.
func plan(ctx context.Context, opts deploy.Options, img Image) (deploy.Options, error) {
	targets, err := targets(ctx, opts, img.AllTargets)
	if err != nil {
		return opts, err
	}
	opts.Targets = targets
	if err := checkRef(img.Ref, img.Options.Remote, len(targets)); err != nil {
		return opts, err
	}
	if img.Options.Base == "" {
		// Nothing in the image but the binary: it must be static.
		opts.Env = append(slices.Clip(opts.Env), "CGO_ENABLED=0")
	} else if err := ociimage.CheckBase(ctx, img.Options.Base, platforms(opts), img.Options.Remote); err != nil {
		return opts, fmt.Errorf("image %s: %w", suggest.Show(img.Ref.String()), err)
	}
	return opts, nil
}

// targets are the targets to build for: every Linux one for all, else
// opts.Targets, else the one the go command builds for by default. Each
// must be Linux, the one OS an image here runs on; the default one that
// is not is named, since the caller did not name it.
func targets(ctx context.Context, opts deploy.Options, all bool) ([]deploy.Target, error) {
	list := opts.Targets
	if all {
		var err error
		if list, err = linuxTargets(ctx, opts.WorkDir, opts.Env); err != nil {
			return nil, err
		}
	}
	if len(list) == 0 {
		t, err := deploy.DefaultTarget(ctx, opts.WorkDir, opts.Env)
		if err != nil {
			return nil, err
		}
		if t.GOOS != "linux" {
			return nil, usagef("-image: images are for Linux, and the go command builds for %s here; name the platforms with -target linux/%s", t, t.GOARCH)
		}
		return []deploy.Target{t}, nil
	}
	for _, t := range list {
		if t.GOOS != "linux" {
			return nil, usagef("-image: images are for Linux; -target %s is not (build it without -image)", t)
		}
	}
	return list, nil
}

// linuxTargets are the targets of AllTargets: every linux/ARCH that go
// tool dist list lists, in its order, for the go command in dir with
// env.
func linuxTargets(ctx context.Context, dir string, env []string) ([]deploy.Target, error) {
	out, _, err := gocmd.Run(ctx, dir, env, "tool", "dist", "list")
	if err != nil {
		return nil, err
	}
	var targets []deploy.Target
	for _, line := range strings.Fields(string(out)) {
		if arch, ok := strings.CutPrefix(line, "linux/"); ok {
			targets = append(targets, deploy.Target{GOOS: "linux", GOARCH: arch})
		}
	}
	return targets, nil
}

// checkRef refuses, before anything is built, what ref cannot take for n
// targets: a docker archive holds one platform's image, and rm may reach
// a registry over plain HTTP on loopback alone.
func checkRef(ref ociimage.Ref, rm ociimage.Remote, n int) error {
	if ref.Kind == ociimage.Archive && n > 1 {
		return usagef("-image %s: a docker archive holds one platform's image, and -target names %d; give one -target, or write an OCI layout (oci:DIR) or to a registry", suggest.Show(ref.String()), n)
	}
	if err := rm.Check(ref); err != nil {
		return usagef("-image %s: %w", suggest.Show(ref.String()), err)
	}
	return nil
}

// platforms are the image's platforms, one for each of opts.Targets, as
// yet without their binaries.
func platforms(opts deploy.Options) []ociimage.Platform {
	var ps []ociimage.Platform
	for _, t := range opts.Targets {
		ps = append(ps, ociimage.Platform{OS: t.GOOS, Architecture: t.GOARCH, Variant: variant(t, opts.Env)})
	}
	return ps
}

// variant is the OCI platform variant of a target: for arm, GOARM's
// version (7 unless the environment says otherwise).
func variant(t deploy.Target, env []string) string {
	if t.GOARCH != "arm" {
		return ""
	}
	v := "7"
	for _, kv := range env {
		if g, ok := strings.CutPrefix(kv, "GOARM="); ok && g != "" {
			v = strings.SplitN(g, ",", 2)[0]
		}
	}
	return "v" + v
}

// tempBinaries points opts.Binary into a new temporary directory, with a
// directory for each target, for a build asked to keep no binary: the
// image is what it makes. It returns the directory, for the caller to
// remove once the image is written.
func tempBinaries(opts *deploy.Options) (string, error) {
	tmp, err := os.MkdirTemp("", "kvgen-image-")
	if err != nil {
		return "", err
	}
	opts.Binary = filepath.Join(tmp, "{os}-{arch}", "bin")
	opts.Built = nil // gone with tmp: a report names none
	for _, t := range opts.Targets {
		if err := os.MkdirAll(filepath.Join(tmp, t.GOOS+"-"+t.GOARCH), 0o755); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
	}
	return tmp, nil
}

// pack packages the binaries opts built as the image and writes it where
// img.Ref says, telling opts.Progress, since compressing large binaries
// takes a while; it returns the image's digest.
func pack(ctx context.Context, opts deploy.Options, img Image) (string, error) {
	iopts := img.Options
	iopts.Platforms = platforms(opts)
	for i, t := range opts.Targets {
		bin := t.Output(opts.Binary)
		if !filepath.IsAbs(bin) {
			bin = filepath.Join(opts.WorkDir, bin)
		}
		iopts.Platforms[i].Binary = bin
	}
	shown := suggest.Show(img.Ref.String())
	start := time.Now()
	opts.Progress("packaging image " + shown)
	built, err := ociimage.Build(ctx, iopts)
	if err == nil {
		err = ociimage.Write(ctx, built, img.Ref, iopts.Remote)
	}
	if err != nil {
		return "", fmt.Errorf("image %s: %w", shown, unwrapImage(err, img.Ref))
	}
	opts.Progress(fmt.Sprintf("packaging image %s: done in %s", shown, time.Since(start).Round(time.Millisecond)))
	return built.Root.Digest.String(), nil
}

// unwrapImage drops the "image REF: " that ociimage's errors start with,
// which pack's own message says.
func unwrapImage(err error, ref ociimage.Ref) error {
	prefix := "image " + suggest.Show(ref.String()) + ": "
	if msg := err.Error(); strings.HasPrefix(msg, prefix) {
		return trimmed{msg[len(prefix):], err}
	}
	return err
}

// trimmed is an error shown without the start of its message.
type trimmed struct {
	msg string
	err error
}

func (t trimmed) Error() string { return t.msg }
func (t trimmed) Unwrap() error { return t.err }
