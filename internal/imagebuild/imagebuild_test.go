package imagebuild

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/deploy"
	"github.com/kvgen/kvgen/internal/ociimage"
)

// The rules are checked before anything is built: the work directory
// has no module, so a build that started would fail otherwise, and say
// so through Progress first.

// options are deploy.Options for targets in an empty directory; every
// progress line goes into *said.
func options(t *testing.T, said *[]string, targets ...string) deploy.Options {
	opts := deploy.Options{
		WorkDir:  t.TempDir(),
		Env:      os.Environ(),
		Manifest: "connectors.yaml",
		Package:  "./host",
		Progress: func(line string) { *said = append(*said, line) },
	}
	for _, s := range targets {
		target, err := deploy.ParseTarget(s)
		require.NoError(t, err)
		opts.Targets = append(opts.Targets, target)
	}
	return opts
}

// image is an Image for ref, a reference in the form kvgen build -image
// takes.
func image(t *testing.T, ref string) Image {
	r, err := ociimage.ParseRef(ref)
	require.NoError(t, err)
	return Image{Ref: r}
}

// refused checks that Build refuses opts and img with a *UsageError that
// says want, having built nothing and written nothing at path.
func refused(t *testing.T, opts deploy.Options, img Image, said *[]string, path, want string) {
	t.Helper()
	_, err := Build(context.Background(), opts, img)
	require.EqualError(t, err, want)
	var ue *UsageError
	assert.True(t, errors.As(err, &ue), "a %T, not a *UsageError", err)
	assert.Empty(t, *said, "a build started")
	assert.NoFileExists(t, path)
	assert.NoDirExists(t, path)
}

func TestNonLinuxTargetIsRefused(t *testing.T) {
	var said []string
	out := filepath.Join(t.TempDir(), "win")
	opts := options(t, &said, "linux/amd64", "windows/amd64")
	refused(t, opts, image(t, "oci:"+out), &said, out,
		"-image: images are for Linux; -target windows/amd64 is not (build it without -image)")
}

func TestNonLinuxDefaultTargetIsRefused(t *testing.T) {
	var said []string
	out := filepath.Join(t.TempDir(), "win")
	opts := options(t, &said)
	opts.Env = append(opts.Env, "GOOS=windows", "GOARCH=arm64")
	refused(t, opts, image(t, "oci:"+out), &said, out,
		"-image: images are for Linux, and the go command builds for windows/arm64 here; name the platforms with -target linux/arm64")
}

func TestArchiveWithTwoTargetsIsRefused(t *testing.T) {
	var said []string
	out := filepath.Join(t.TempDir(), "two.tar")
	opts := options(t, &said, "linux/amd64", "linux/arm64")
	refused(t, opts, image(t, "docker-archive:"+out), &said, out,
		"-image docker-archive:"+out+": a docker archive holds one platform's image, and -target names 2; give one -target, or write an OCI layout (oci:DIR) or to a registry")
}

func TestInsecureOffLoopbackIsRefused(t *testing.T) {
	var said []string
	opts := options(t, &said, "linux/amd64")
	img := image(t, "registry.example/team/host:edge")
	img.Options.Remote = ociimage.Remote{Insecure: true}
	refused(t, opts, img, &said, filepath.Join(opts.WorkDir, "registry.example"),
		`-image registry.example/team/host:edge: -insecure (plain HTTP) is only for a registry on this machine's loopback, not "registry.example"`)
}

// baseLayout writes an OCI layout tagged b whose image index has an
// image for each platform, and returns its reference. The images
// themselves are not there: a base is checked from its index alone.
func baseLayout(t *testing.T, platforms ...ocispec.Platform) string {
	dir := filepath.Join(t.TempDir(), "base")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755))
	put := func(name string, v any) []byte {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
		return data
	}
	put(ocispec.ImageLayoutFile, ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	index := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	blob := func(mediaType string, v any) ocispec.Descriptor {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "blobs", "sha256", d.Digest.Encoded()), data, 0o644))
		return d
	}
	for _, p := range platforms {
		// An image of no layers, whose config says its platform.
		cfg := blob(ocispec.MediaTypeImageConfig, ocispec.Image{Platform: p, RootFS: ocispec.RootFS{Type: "layers"}})
		m := blob(ocispec.MediaTypeImageManifest, ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfg})
		m.Platform = &p
		index.Manifests = append(index.Manifests, m)
	}
	data, err := json.Marshal(index)
	require.NoError(t, err)
	d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromBytes(data), Size: int64(len(data)),
		Annotations: map[string]string{ocispec.AnnotationRefName: "b"}}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "blobs", "sha256", d.Digest.Encoded()), data, 0o644))
	put(ocispec.ImageIndexFile, ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, Manifests: []ocispec.Descriptor{d}})
	return "oci:" + dir + ":b"
}

// A base that lacks a target's platform is named, with those it has,
// before anything is built; the command line may be right and the base
// wrong, so it is no usage error.
func TestBaseMissingAPlatformIsNamed(t *testing.T) {
	var said []string
	out := filepath.Join(t.TempDir(), "based")
	opts := options(t, &said, "linux/amd64", "linux/arm64")
	img := image(t, "oci:"+out)
	img.Options.Base = baseLayout(t, ocispec.Platform{OS: "linux", Architecture: "amd64"})
	_, err := Build(context.Background(), opts, img)
	require.EqualError(t, err, "image oci:"+out+": base image "+img.Options.Base+" has no linux/arm64 image (it has linux/amd64)")
	assert.False(t, errors.As(err, new(*UsageError)))
	assert.Empty(t, said, "a build started")
	assert.NoDirExists(t, out)
}

// Without a base, the image holds the binary alone: it is built with
// CGO_ENABLED=0, whatever the environment says, and the caller's
// environment is left as it was. On a base, which may have the C library,
// the environment is the caller's.
func TestStaticWithoutABase(t *testing.T) {
	var said []string
	opts := options(t, &said, "linux/amd64")
	env := []string{"CGO_ENABLED=1", "GOFLAGS=-buildvcs=false"}
	opts.Env = env[:1:2]
	img := image(t, "oci:"+filepath.Join(t.TempDir(), "img"))
	planned, err := plan(context.Background(), opts, img)
	require.NoError(t, err)
	assert.Equal(t, []string{"CGO_ENABLED=1", "CGO_ENABLED=0"}, planned.Env)
	assert.Equal(t, "GOFLAGS=-buildvcs=false", env[1], "the caller's environment")

	img.Options.Base = baseLayout(t, ocispec.Platform{OS: "linux", Architecture: "amd64"})
	planned, err = plan(context.Background(), opts, img)
	require.NoError(t, err)
	assert.Equal(t, []string{"CGO_ENABLED=1"}, planned.Env)
	assert.Empty(t, said)
}

// -target all is every Linux target the go command builds for.
func TestAllTargetsAreLinux(t *testing.T) {
	var said []string
	opts := options(t, &said, "linux/amd64")
	got, err := targets(context.Background(), opts, true)
	require.NoError(t, err)
	assert.Contains(t, got, deploy.Target{GOOS: "linux", GOARCH: "arm64"})
	for _, target := range got {
		assert.Equal(t, "linux", target.GOOS)
	}
}

// Without -o, the binaries go into a temporary directory, a directory a
// target, and no report names them.
func TestTempBinaries(t *testing.T) {
	var said []string
	opts := options(t, &said, "linux/amd64", "linux/arm64")
	opts.Built = func(deploy.Target, string) { t.Error("Built called") }
	tmp, err := tempBinaries(&opts)
	require.NoError(t, err)
	defer os.RemoveAll(tmp)
	assert.Nil(t, opts.Built)
	for _, target := range opts.Targets {
		bin := target.Output(opts.Binary)
		assert.Equal(t, filepath.Join(tmp, target.GOOS+"-"+target.GOARCH, "bin"), bin)
		assert.DirExists(t, filepath.Dir(bin))
	}
}

func TestVariant(t *testing.T) {
	for _, tc := range []struct {
		target deploy.Target
		env    []string
		want   string
	}{
		{deploy.Target{GOOS: "linux", GOARCH: "amd64"}, nil, ""},
		{deploy.Target{GOOS: "linux", GOARCH: "arm"}, nil, "v7"},
		{deploy.Target{GOOS: "linux", GOARCH: "arm"}, []string{"GOARM=6"}, "v6"},
		{deploy.Target{GOOS: "linux", GOARCH: "arm"}, []string{"GOARM=5,softfloat"}, "v5"},
	} {
		if got := variant(tc.target, tc.env); got != tc.want {
			t.Errorf("variant(%v, %q) = %q, want %q", tc.target, tc.env, got, tc.want)
		}
	}
}
