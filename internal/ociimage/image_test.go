package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/inspect"
	"github.com/kvgen/kvgen/internal/kvgentest"
)

// tinyDescription is the registry description the tiny program links.
var tinyDescription = inspect.Description{
	Manifest:       "tiny.yaml",
	ManifestSHA256: inspect.SumManifest([]byte("tiny")),
	Package:        "example.com/tiny",
	Entries: []inspect.Entry{{
		Name: "memory", Roles: []string{"scheduler", "worker"},
		Import: "example.com/tiny/memory", Constructor: "New", Module: "example.com/tiny",
	}},
}

var (
	tinyMu    sync.Mutex
	tinyBuilt = map[string]string{}
)

// TestMain removes, when the tests are done, the directory tiny builds
// in, which they share.
func TestMain(m *testing.M) { os.Exit(kvgentest.Main(m).Run()) }

// tiny builds, once per test binary, a small static program for
// linux/arch that links tinyDescription as a kvgen registry does and
// prints "tiny" when run (without fmt, and stripped: every image the tests
// build gzips it, under the race detector), and returns a copy of it in a directory of its
// own.
func tiny(t testing.TB, arch string) string {
	t.Helper()
	tinyMu.Lock()
	defer tinyMu.Unlock()
	bin, ok := tinyBuilt[arch]
	if !ok {
		enc, err := inspect.Encode(tinyDescription)
		require.NoError(t, err)
		dir := filepath.Join(kvgentest.SharedDir(t), "tiny-"+arch)
		kvgentest.WriteFiles(t, dir, map[string]string{
			"go.mod":  "module example.com/tiny\n\ngo 1.26.0\n",
			"main.go": fmt.Sprintf("package main\n\nvar registry = %q\n\nfunc main() { println(\"tiny\", len(registry) > 0) }\n", enc),
		})
		bin = filepath.Join(dir, "tiny-"+arch)
		res := kvgentest.Run(t, dir, []string{"GOOS=linux", "GOARCH=" + arch, "CGO_ENABLED=0", "GOFLAGS="}, kvgentest.BuildTimeout,
			"go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin, ".")
		require.Equal(t, 0, res.Code, "%s", res.Stderr)
		tinyBuilt[arch] = bin
	}
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	cp := filepath.Join(t.TempDir(), "tiny")
	require.NoError(t, os.WriteFile(cp, data, 0o755))
	return cp
}

// platforms are tiny's images for linux/amd64 and linux/arm64, each
// binary in a directory of its own.
func platforms(t testing.TB) []Platform {
	return []Platform{
		{OS: "linux", Architecture: "amd64", Binary: tiny(t, "amd64")},
		{OS: "linux", Architecture: "arm64", Binary: tiny(t, "arm64")},
	}
}

func options(ps []Platform) Options {
	return Options{Platforms: ps, Created: time.Unix(0, 0), Tool: "v0.0.0-test"}
}

// Two builds from binaries in different places are one digest, and the
// layouts they write are the same bytes.
func TestReproducible(t *testing.T) {
	ctx := context.Background()
	var roots []string
	var trees []map[string]string
	for range 2 {
		img, err := Build(ctx, options(platforms(t)))
		require.NoError(t, err)
		dir := filepath.Join(t.TempDir(), "layout")
		ref, err := ParseRef("oci:" + dir + ":v1")
		require.NoError(t, err)
		require.NoError(t, Write(ctx, img, ref, Remote{}))
		roots = append(roots, img.Root.Digest.String())
		trees = append(trees, treeSums(t, dir))
	}
	assert.Equal(t, roots[0], roots[1])
	assert.Equal(t, trees[0], trees[1])
}

// treeSums is every file under dir with the SHA-256 of its content.
func treeSums(t *testing.T, dir string) map[string]string {
	sums := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		sums[must(filepath.Rel(dir, p))] = fmt.Sprintf("%x", sha256.Sum256(data))
		return err
	}))
	return sums
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The layer holds the binary and /tmp, sorted, owned by root, with fixed
// modes and times; the config runs the binary as the non-root user.
func TestLayerAndConfig(t *testing.T) {
	ctx := context.Background()
	opts := options(platforms(t)[:1])
	opts.CABundle = []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
	opts.Labels = map[string]string{"org.opencontainers.image.source": "https://example.com/tiny", "team": "kv"}
	img, err := Build(ctx, opts)
	require.NoError(t, err)
	assert.Equal(t, ocispec.MediaTypeImageManifest, img.Root.MediaType)
	m, err := fetchManifest(ctx, img, img.Root)
	require.NoError(t, err)
	var cfg ocispec.Image
	require.NoError(t, fetchJSON(ctx, img, m.Config, &cfg))
	assert.Equal(t, []string{"/usr/local/bin/tiny"}, cfg.Config.Entrypoint)
	assert.Equal(t, User, cfg.Config.User)
	assert.Equal(t, "/", cfg.Config.WorkingDir)
	assert.Contains(t, cfg.Config.Env, "SSL_CERT_FILE="+CAFile)
	assert.Equal(t, "1970-01-01T00:00:00Z", cfg.Config.Labels[LabelCreated])
	assert.Equal(t, "https://example.com/tiny", cfg.Config.Labels[LabelSource])
	assert.Equal(t, "kv", cfg.Config.Labels["team"])
	assert.Equal(t, tinyDescription.ManifestSHA256, cfg.Config.Labels[LabelManifest])
	require.Len(t, m.Layers, 1)

	data := fetchAll(t, img, m.Layers[0])
	zr, err := gzip.NewReader(bytes.NewReader(data))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		assert.Zero(t, h.Uid+h.Gid, h.Name)
		assert.Empty(t, h.Uname+h.Gname, h.Name)
		assert.True(t, h.ModTime.Equal(time.Unix(0, 0)), h.Name)
		switch h.Name {
		case "tmp/":
			assert.Equal(t, int64(0o1777), h.Mode)
		case "usr/local/bin/tiny":
			assert.Equal(t, int64(0o755), h.Mode)
		case "etc/ssl/certs/ca-certificates.crt":
			assert.Equal(t, int64(0o644), h.Mode)
		}
	}
	assert.Equal(t, []string{"etc/", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt", "tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/tiny"}, names)
}

func fetchAll(t *testing.T, img *Image, d ocispec.Descriptor) []byte {
	r, err := img.Fetch(context.Background(), d)
	require.NoError(t, err)
	defer r.Close()
	data, err := io.ReadAll(r)
	require.NoError(t, err)
	return data
}

// inspectBack checks what Inspect reads of the image at ref: every
// platform, each binary's registry, and the SBOM attached to each, which
// is the SBOM of the binary taken out of the image. It runs the
// binary of this machine's platform, if the image has it.
func inspectBack(t *testing.T, ref Ref, rm Remote, img *Image) {
	t.Helper()
	found, err := Inspect(context.Background(), ref, rm, true)
	require.NoError(t, err)
	require.Len(t, found, len(img.Platforms))
	for i, f := range found {
		require.NoError(t, f.Err)
		assert.Equal(t, img.Platforms[i].Platform.String(), f.Platform.String())
		assert.Equal(t, img.Platforms[i].Manifest.Digest, f.Manifest.Digest)
		require.NotNil(t, f.Binary)
		require.Len(t, f.Binary.Registries, 1)
		assert.Equal(t, "memory", f.Binary.Registries[0].Entries[0].Name)
		want, err := SBOM(f.Binary, "v0.0.0-test")
		require.NoError(t, err)
		assert.Equal(t, string(want), string(f.SBOM))
		assert.Equal(t, string(img.Platforms[i].SBOMData), string(f.SBOM))
	}
	runFromImage(t, ref, rm)
}

// runFromImage takes this machine's platform's binary out of the image's
// layer and runs it.
func runFromImage(t *testing.T, ref Ref, rm Remote) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	ctx := context.Background()
	src, root, err := rm.open(ctx, ref, newBudget())
	require.NoError(t, err)
	d := root
	if root.MediaType == ocispec.MediaTypeImageIndex {
		var index ocispec.Index
		require.NoError(t, fetchJSON(ctx, src, root, &index))
		for _, m := range index.Manifests {
			if m.Platform.Architecture == runtime.GOARCH {
				d = m
			}
		}
	}
	m, err := fetchManifest(ctx, src, d)
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "tiny")
	f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = extract(ctx, src, m.Layers, "usr/local/bin/tiny", f, newBudget())
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out, err := exec.Command(bin).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "tiny true\n", string(out))
}

func TestLayoutAndArchiveReadBack(t *testing.T) {
	ctx := context.Background()
	img := index(t)
	dir := filepath.Join(t.TempDir(), "layout")
	ref := must(ParseRef("oci:" + dir + ":v1"))
	require.NoError(t, Write(ctx, img, ref, Remote{}))
	inspectBack(t, ref, Remote{}, img)
	// Without the tag: the layout's one image.
	inspectBack(t, must(ParseRef("oci:"+dir)), Remote{}, img)

	one := image(t)
	tarball := filepath.Join(t.TempDir(), "tiny.tar")
	aref := must(ParseRef("docker-archive:" + tarball))
	require.NoError(t, Write(ctx, one, aref, Remote{}))
	inspectBack(t, aref, Remote{}, one)
	// Written again, the same bytes.
	first, err := os.ReadFile(tarball)
	require.NoError(t, err)
	require.NoError(t, Write(ctx, one, aref, Remote{}))
	again, err := os.ReadFile(tarball)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(first, again))
	assert.Contains(t, string(first), "manifest.json")
	assert.Contains(t, string(first), `"RepoTags":[]`)

	// Named, docker load tags it so.
	named := must(ParseRef("docker-archive:" + tarball + ":team/tiny:edge"))
	require.NoError(t, Write(ctx, one, named, Remote{}))
	inspectBack(t, named, Remote{}, one)
	s, err := openLocal(ctx, named, newBudget())
	require.NoError(t, err)
	data, err := s.readSmall("manifest.json")
	require.NoError(t, err)
	assert.Contains(t, string(data), `"RepoTags":["team/tiny:edge"]`)
}

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind Kind
		path string
		tag  string
		repo string
	}{
		{"oci:dir", Layout, "dir", "", ""},
		{"oci:out/img:edge", Layout, "out/img", "edge", ""},
		{"docker-archive:img.tar", Archive, "img.tar", "", ""},
		{"docker-archive:img.tar:kvserver:edge", Archive, "img.tar", "kvserver:edge", ""},
		{"docker-archive:img.tar:registry.example:5000/team/kvserver:edge", Archive, "img.tar", "registry.example:5000/team/kvserver:edge", ""},
		{"registry.example/team/kvserver:edge", Registry, "", "", "team/kvserver"},
		{"127.0.0.1:5000/kvserver", Registry, "", "", "kvserver"},
	} {
		r, err := ParseRef(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.kind, r.Kind, tc.in)
		assert.Equal(t, tc.path, r.Path, tc.in)
		assert.Equal(t, tc.tag, r.Tag, tc.in)
		assert.Equal(t, tc.repo, r.Remote.Repository, tc.in)
	}
	r := must(ParseRef("127.0.0.1:5000/kvserver"))
	assert.Equal(t, "latest", r.Remote.Reference)
	for _, bad := range []string{"Not A/Reference", "oci:", "oci:dir:-bad", "docker-archive:", "docker-archive:img.tar:Upper:edge", "docker-archive:img.tar:notag"} {
		_, err := ParseRef(bad)
		assert.Error(t, err, bad)
	}
	assert.True(t, IsLoopback("127.0.0.1:5000"))
	assert.True(t, IsLoopback("localhost:5000"))
	assert.True(t, IsLoopback("[::1]:5000"))
	assert.False(t, IsLoopback("registry.example:5000"))
	assert.False(t, IsLoopback("10.0.0.1"))
}

// On a base image, the binary's layer goes on top of the base's layers,
// and the config keeps the base's environment and labels under kvgen's.
func TestOnBase(t *testing.T) {
	ctx := context.Background()
	baseOpts := options(platforms(t))
	baseOpts.Labels = map[string]string{"base": "yes", LabelVersion: "v9"}
	base, err := Build(ctx, baseOpts)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "base")
	require.NoError(t, Write(ctx, base, must(ParseRef("oci:"+dir+":b")), Remote{}))

	opts := options(platforms(t))
	opts.Base = "oci:" + dir + ":b"
	opts.CABundle = []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
	img, err := Build(ctx, opts)
	require.NoError(t, err)
	for i, pi := range img.Platforms {
		m, err := fetchManifest(ctx, img, pi.Manifest)
		require.NoError(t, err)
		bm, err := fetchManifest(ctx, img, base.Platforms[i].Manifest)
		require.NoError(t, err)
		require.Len(t, m.Layers, 2)
		assert.Equal(t, bm.Layers[0].Digest, m.Layers[0].Digest)
		var cfg ocispec.Image
		require.NoError(t, fetchJSON(ctx, img, m.Config, &cfg))
		assert.Len(t, cfg.RootFS.DiffIDs, 2)
		assert.Len(t, cfg.History, 2)
		assert.Equal(t, "yes", cfg.Config.Labels["base"])
		assert.NotContains(t, cfg.Config.Labels, LabelVersion)
		assert.NotContains(t, cfg.Config.Labels, ocispec.AnnotationBaseImageName, "a layout's path")
		assert.Equal(t, base.Platforms[i].Manifest.Digest.String(), cfg.Config.Labels[ocispec.AnnotationBaseImageDigest])
		assert.Contains(t, cfg.Config.Env, "PATH=/usr/local/bin:/usr/bin:/bin")
		assert.Contains(t, cfg.Config.Env, "SSL_CERT_FILE="+CAFile)
		assert.Equal(t, pi.Platform.Architecture, cfg.Architecture)
	}
	// Written to a layout of its own, the base's blobs come along.
	out := filepath.Join(t.TempDir(), "out")
	ref := must(ParseRef("oci:" + out))
	require.NoError(t, Write(ctx, img, ref, Remote{}))
	inspectBack(t, ref, Remote{}, img)

	// A base without a platform is named, with those it has.
	opts.Platforms = append(opts.Platforms, Platform{OS: "linux", Architecture: "arm", Variant: "v7", Binary: opts.Platforms[0].Binary})
	err = CheckBase(ctx, opts.Base, opts.Platforms, Remote{})
	require.EqualError(t, err, "base image oci:"+dir+":b has no linux/arm/v7 image (it has linux/amd64, linux/arm64)")
}

// A layout holds several images by tag; writing a tag again replaces its
// image, and the SBOMs of the image it replaced go from index.json.
func TestLayoutTags(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "layout")
	two := index(t)
	require.NoError(t, Write(ctx, two, must(ParseRef("oci:"+dir+":two")), Remote{}))
	oneOpts := options(platforms(t)[:1])
	oneOpts.Created = time.Unix(2, 0) // an image of its own, not two's linux/amd64
	one, err := Build(ctx, oneOpts)
	require.NoError(t, err)
	require.NoError(t, Write(ctx, one, must(ParseRef("oci:"+dir+":one")), Remote{}))
	s, err := openLocal(ctx, must(ParseRef("oci:"+dir)), newBudget())
	require.NoError(t, err)
	assert.Len(t, s.index.Manifests, 1+2+1+1) // two and its SBOMs, one and its SBOM

	// Untagged, the layout has two images: which one must be said.
	_, err = Inspect(ctx, must(ParseRef("oci:"+dir)), Remote{}, false)
	require.ErrorContains(t, err, "holds 2 images; name one as oci:"+dir+":TAG")

	// "two" now names an image on another created time: the old one's
	// SBOMs go; "one" and its SBOM stay.
	opts := options(platforms(t))
	opts.Created = time.Unix(1, 0)
	newer, err := Build(ctx, opts)
	require.NoError(t, err)
	require.NotEqual(t, two.Root.Digest, newer.Root.Digest)
	require.NoError(t, Write(ctx, newer, must(ParseRef("oci:"+dir+":two")), Remote{}))
	s, err = openLocal(ctx, must(ParseRef("oci:"+dir)), newBudget())
	require.NoError(t, err)
	assert.Len(t, s.index.Manifests, 1+2+1+1)
	for _, d := range s.index.Manifests {
		assert.NotEqual(t, two.Root.Digest, d.Digest)
		for _, pi := range two.Platforms {
			assert.NotEqual(t, pi.SBOM.Digest, d.Digest)
		}
	}
	inspectBack(t, must(ParseRef("oci:"+dir+":two")), Remote{}, newer)
	inspectBack(t, must(ParseRef("oci:"+dir+":one")), Remote{}, one)
}

// A layer listed many times, in one image or in many, is read once for
// each path inspect looks for: 256 copies of one small layer in each of 64
// manifests once cost minutes of processor time.
func TestALayerListedManyTimesIsReadOnce(t *testing.T) {
	ctx := context.Background()
	ref := must(ParseRef("oci:" + filepath.Join(t.TempDir(), "layout") + ":t"))
	require.NoError(t, Write(ctx, image(t), ref, Remote{}))
	b := newBudget()
	src, root, err := Remote{}.open(ctx, ref, b)
	require.NoError(t, err)
	d := root
	if root.MediaType == ocispec.MediaTypeImageIndex {
		var index ocispec.Index
		require.NoError(t, fetchJSON(ctx, src, root, &index))
		d = index.Manifests[0]
	}
	m, err := fetchManifest(ctx, src, d)
	require.NoError(t, err)
	layer := m.Layers[len(m.Layers)-1]
	layers := slices.Repeat([]ocispec.Descriptor{layer}, maxLayers)

	start := b.opens.left.Load()
	opened := func() int64 { return start - b.opens.left.Load() }
	for range 3 { // three images listing the same layers
		_, err = extract(ctx, src, layers, "usr/local/bin/absent", io.Discard, b)
		require.ErrorIs(t, err, errNotInLayers)
	}
	assert.Equal(t, int64(1), opened(), "one read of the layer")

	name := ""
	tr := tar.NewReader(must(gzip.NewReader(must(os.Open(filepath.Join(ref.Path, blobPath(layer)))))))
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		if h.Typeflag == tar.TypeReg {
			name = cleanPath(h.Name)
		}
	}
	require.NotEmpty(t, name)
	before := opened()
	for range 3 {
		_, err = extract(ctx, src, layers, name, io.Discard, b)
		require.NoError(t, err)
	}
	// Each image reads the layer that has the file, whose own entries
	// make every directory on its path: no copy below it is read.
	assert.Equal(t, int64(3), opened()-before)
}

// A CA bundle holds PEM certificates and nothing PEM encodes but them: a
// server.pem with its private key, or a file given by mistake, would be
// published in the image.
func TestCABundleHoldsOnlyCertificates(t *testing.T) {
	cert := "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"
	key := "-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n"
	require.NoError(t, CheckCABundle([]byte("# Bundle of CA Root Certificates\n\nRoot CA\n=======\n"+cert+cert)))
	for bundle, want := range map[string]string{
		cert + key:              `it holds a PEM block of type "PRIVATE KEY", and a CA bundle holds only certificates`,
		"root:x:0:0:root:/root": "it holds no PEM certificate",
		"":                      "it holds no PEM certificate",
	} {
		assert.EqualError(t, CheckCABundle([]byte(bundle)), want)
		opts := options(platforms(t)[:1])
		opts.CABundle = []byte(bundle)
		_, err := Build(context.Background(), opts)
		assert.EqualError(t, err, "the CA bundle: "+want)
	}
}
