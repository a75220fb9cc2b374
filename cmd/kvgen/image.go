package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kvgen/kvgen/gen/deploy"
	"github.com/kvgen/kvgen/internal/ociimage"
	"github.com/kvgen/kvgen/internal/readfile"
	"github.com/kvgen/kvgen/internal/suggest"
)

// imageFlags are kvgen build's flags for -image.
type imageFlags struct {
	ref, base, caBundle string
	labels              labelsFlag
	remote              remoteFlags
	// allTargets is -target all.
	allTargets bool
}

func (f *imageFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.ref, "image", "", "also package the binaries as an OCI image (an image index for several -target): a registry's HOST/REPOSITORY[:TAG], oci:DIR[:TAG] or docker-archive:FILE[:NAME:TAG]")
	fs.StringVar(&f.base, "base", "", "with -image, the base image (a registry's or oci:DIR[:TAG]), which must have every target's platform (default: none, and the binary is built with CGO_ENABLED=0)")
	fs.StringVar(&f.caBundle, "ca-bundle", "", "with -image, a PEM file of CA certificates to put at "+ociimage.CAFile)
	fs.Var(&f.labels, "image-label", "with -image, a KEY=VALUE label for the image's config, over kvgen's; repeat it for several")
	f.remote.register(fs)
}

// labelsFlag collects -image-label KEY=VALUE.
type labelsFlag map[string]string

func (l *labelsFlag) String() string {
	var s []string
	for k, v := range *l {
		s = append(s, k+"="+v)
	}
	return strings.Join(s, ",")
}

func (l *labelsFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	if *l == nil {
		*l = labelsFlag{}
	}
	(*l)[k] = val
	return nil
}

// maxCABundle bounds -ca-bundle; a system's whole bundle is some 200 KiB.
const maxCABundle = 16 << 20

// build builds the deployment for each Linux target and packages it as
// an image where f.ref says.
func (f *imageFlags) build(ctx context.Context, e *env, opts deploy.Options) int {
	ref, err := ociimage.ParseRef(f.ref)
	if err != nil {
		e.errorf("-image: %v", err)
		return exitUsage
	}
	var bundle []byte
	if f.caBundle != "" {
		if bundle, err = readfile.Read(f.caBundle, maxCABundle); err != nil {
			e.errorf("-ca-bundle: %v", err)
			return exitUsage
		}
	}
	created, err := sourceDateEpoch()
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if f.allTargets {
		if opts.Targets, err = linuxTargets(ctx, opts.WorkDir, opts.Env); err != nil {
			e.report(err)
			return exitError
		}
	}
	if len(opts.Targets) == 0 {
		t, err := deploy.DefaultTarget(ctx, opts.WorkDir, opts.Env)
		if err != nil {
			e.report(err)
			return exitError
		}
		if t.GOOS != "linux" {
			e.errorf("-image: images are for Linux, and the go command builds for %s here; name the platforms with -target linux/%s", t, t.GOARCH)
			return exitUsage
		}
		opts.Targets = []deploy.Target{t}
	}
	for _, t := range opts.Targets {
		if t.GOOS != "linux" {
			e.errorf("-image: images are for Linux; -target %s is not (build it without -image)", t)
			return exitUsage
		}
	}
	if ref.Kind == ociimage.Archive && len(opts.Targets) > 1 {
		e.errorf("-image %s: a docker archive holds one platform's image, and -target names %d; give one -target, or write an OCI layout (oci:DIR) or to a registry", suggest.Show(ref.String()), len(opts.Targets))
		return exitUsage
	}
	var platforms []ociimage.Platform
	for _, t := range opts.Targets {
		platforms = append(platforms, ociimage.Platform{OS: t.GOOS, Architecture: t.GOARCH, Variant: variant(t, opts.Env)})
	}
	rm, err := f.remote.remote()
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if err := rm.Check(ref); err != nil {
		e.errorf("-image %s: %v", suggest.Show(ref.String()), err)
		return exitUsage
	}
	if f.base == "" {
		// Nothing in the image but the binary: it must be static.
		opts.Env = append(opts.Env, "CGO_ENABLED=0")
	} else if err := ociimage.CheckBase(ctx, f.base, platforms, rm); err != nil {
		e.report(fmt.Errorf("image %s: %w", suggest.Show(ref.String()), err))
		return exitError
	}
	if opts.Binary == "" {
		tmp, err := os.MkdirTemp("", "kvgen-image-")
		if err != nil {
			e.report(err)
			return exitError
		}
		defer os.RemoveAll(tmp)
		opts.Binary = filepath.Join(tmp, "{os}-{arch}", "bin")
		opts.Built = nil // gone with tmp: a report names none
		for _, t := range opts.Targets {
			if err := os.MkdirAll(filepath.Join(tmp, t.GOOS+"-"+t.GOARCH), 0o755); err != nil {
				e.report(err)
				return exitError
			}
		}
	}
	if err := deploy.Build(ctx, opts); err != nil {
		return buildFailed(e, err)
	}
	iopts := ociimage.Options{
		CABundle: bundle,
		Base:     f.base,
		Labels:   f.labels,
		Created:  created,
		Tool:     ownVersion(),
		Remote:   rm,
	}
	for i, t := range opts.Targets {
		bin := t.Output(opts.Binary)
		if !filepath.IsAbs(bin) {
			bin = filepath.Join(opts.WorkDir, bin)
		}
		platforms[i].Binary = bin
	}
	iopts.Platforms = platforms
	start := time.Now()
	opts.Progress("packaging image " + suggest.Show(ref.String()))
	img, err := ociimage.Build(ctx, iopts)
	if err == nil {
		err = ociimage.Write(ctx, img, ref, iopts.Remote)
	}
	if err != nil {
		e.report(fmt.Errorf("image %s: %w", suggest.Show(ref.String()), unwrapImage(err, ref)))
		return exitError
	}
	opts.Progress(fmt.Sprintf("packaging image %s: done in %s", suggest.Show(ref.String()), time.Since(start).Round(time.Millisecond)))
	if e.asJSON {
		e.json.set("image", builtImage{ref.String(), img.Root.Digest.String()})
	} else {
		fmt.Fprintf(e.stdout, "%s %s\n", suggest.Show(ref.String()), img.Root.Digest)
	}
	return exitOK
}

// builtImage is an image as `kvgen build -image -json` reports it.
type builtImage struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// unwrapImage drops the "image REF: " that ociimage's errors start with,
// which build's own message says.
func unwrapImage(err error, ref ociimage.Ref) error {
	prefix := "image " + suggest.Show(ref.String()) + ": "
	if msg := err.Error(); strings.HasPrefix(msg, prefix) {
		return trimmed{msg[len(prefix):], err}
	}
	return err
}

type trimmed struct {
	msg string
	err error
}

func (t trimmed) Error() string { return t.msg }
func (t trimmed) Unwrap() error { return t.err }

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

// sourceDateEpoch is the images' creation time: SOURCE_DATE_EPOCH, as
// reproducible builds set it, else the Unix epoch.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%s is not a count of seconds since the Unix epoch", suggest.Show(s))
	}
	return time.Unix(n, 0).UTC(), nil
}
