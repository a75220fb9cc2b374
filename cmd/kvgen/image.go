package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvgen/kvgen/internal/deploy"
	"github.com/kvgen/kvgen/internal/imagebuild"
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

// build builds the deployment and packages it as an image where f.ref
// says; what an image may be is imagebuild's to say.
func (f *imageFlags) build(ctx context.Context, e *env, opts deploy.Options) int {
	img, code := f.image(e)
	if code >= 0 {
		return code
	}
	digest, err := imagebuild.Build(ctx, opts, img)
	if err != nil {
		return buildFailed(e, err)
	}
	if e.asJSON {
		e.json.set("image", builtImage{img.Ref.String(), digest})
	} else {
		fmt.Fprintf(e.stdout, "%s %s\n", suggest.Show(img.Ref.String()), digest)
	}
	return exitOK
}

// image is the image the flags ask for; a problem with them is reported
// as a usage error, whose exit code it returns (else -1).
func (f *imageFlags) image(e *env) (imagebuild.Image, int) {
	img := imagebuild.Image{AllTargets: f.allTargets}
	var err error
	if img.Ref, err = ociimage.ParseRef(f.ref); err != nil {
		e.errorf("-image: %v", err)
		return img, exitUsage
	}
	var bundle []byte
	if f.caBundle != "" {
		if bundle, err = readfile.Read(f.caBundle, maxCABundle); err == nil {
			err = ociimage.CheckCABundle(bundle)
		}
		if err != nil {
			e.errorf("-ca-bundle %s: %v", suggest.Show(f.caBundle), err)
			return img, exitUsage
		}
	}
	created, err := sourceDateEpoch()
	if err != nil {
		e.errorf("%v", err)
		return img, exitUsage
	}
	rm, err := f.remote.remote()
	if err != nil {
		e.errorf("%v", err)
		return img, exitUsage
	}
	img.Options = ociimage.Options{
		CABundle: bundle,
		Base:     f.base,
		Labels:   f.labels,
		Created:  created,
		Tool:     ownVersion(),
		Remote:   rm,
	}
	return img, -1
}

// builtImage is an image as `kvgen build -image -json` reports it.
type builtImage struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
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
