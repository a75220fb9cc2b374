package ociimage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a destination holds may have been planted by someone else: a
// build writes no file through a link in it, keeps no blob whose bytes are
// not the blob's, reads its index.json as a bounded regular file, and
// writes nothing when the destination cannot take the image.

var built = struct {
	sync.Mutex
	images map[int]*Image
}{images: map[int]*Image{}}

// image is one platform's image, built once for these tests: building
// it again gives the same one, and nothing changes an Image once built.
func image(t testing.TB) *Image { return builtOnce(t, 1) }

// index is the two platforms' image index, built once for these tests.
func index(t testing.TB) *Image { return builtOnce(t, 2) }

// builtOnce is the image of platforms(t)'s first n, built at most once
// per test binary: every build gzips tiny's binaries, under the race
// detector.
func builtOnce(t testing.TB, n int) *Image {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if built.images[n] == nil {
		img, err := Build(context.Background(), options(platforms(t)[:n]))
		require.NoError(t, err)
		built.images[n] = img
	}
	return built.images[n]
}

// blobFile is where a layout keeps blob d.
func blobFile(dir string, d ocispec.Descriptor) string {
	return filepath.Join(dir, ocispec.ImageBlobsDir, d.Digest.Algorithm().String(), d.Digest.Encoded())
}

// outsideFile is a file outside any destination, with its content.
func outsideFile(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "precious")
	require.NoError(t, os.WriteFile(path, []byte("precious"), 0o644))
	return path, "precious"
}

func assertUnchanged(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, string(got), "a file outside the destination was written")
}

func TestLayoutWritesNoBlobThroughALink(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	dir := filepath.Join(t.TempDir(), "layout")
	outside, content := outsideFile(t)
	// Every blob the image writes is a link to the file outside; the
	// empty config of its SBOM has the same name in every build.
	blobs, err := img.blobs(ctx)
	require.NoError(t, err)
	for _, d := range blobs {
		require.NoError(t, os.MkdirAll(filepath.Dir(blobFile(dir, d)), 0o755))
		require.NoError(t, os.Symlink(outside, blobFile(dir, d)))
	}

	require.NoError(t, os.Symlink(outside, filepath.Join(dir, ocispec.ImageLayoutFile)))

	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{}))
	assertUnchanged(t, outside, content)
	fi, err := os.Lstat(filepath.Join(dir, ocispec.ImageLayoutFile))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "oci-layout is still a link, which no reader follows out of the layout")
	for _, d := range blobs {
		fi, err := os.Lstat(blobFile(dir, d))
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "%s is still a link", d.Digest)
	}
	_, err = Inspect(ctx, must(ParseRef("oci:"+dir+":t")), Remote{}, false)
	require.NoError(t, err)
}

func TestLayoutReplacesABlobWhoseBytesAreWrong(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{}))

	// A planted layer of the right size, every byte wrong.
	m, err := fetchManifest(ctx, img, img.Platforms[0].Manifest)
	require.NoError(t, err)
	layer := blobFile(dir, m.Layers[0])
	require.NoError(t, os.Chmod(layer, 0o644))
	require.NoError(t, os.WriteFile(layer, make([]byte, m.Layers[0].Size), 0o644))

	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{}))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	assert.True(t, hasBlob(root, blobPath(m.Layers[0]), m.Layers[0]), "the planted layer was kept")
}

// A directory of the layout planted as a link to one outside it is not
// written through: the write fails, and nothing lands outside.
func TestLayoutWritesNothingThroughALinkedDirectory(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	for _, linked := range []string{ocispec.ImageBlobsDir, ocispec.ImageBlobsDir + "/sha256"} {
		t.Run(linked, func(t *testing.T) {
			dir, outside := filepath.Join(t.TempDir(), "layout"), t.TempDir()
			link := filepath.Join(dir, filepath.FromSlash(linked))
			require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
			require.NoError(t, os.Symlink(outside, link))

			err := Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{})
			require.Error(t, err)
			entries, rerr := os.ReadDir(outside)
			require.NoError(t, rerr)
			assert.Empty(t, entries, "written through the link")
		})
	}
}

// An index.json planted with more images than a layout may list is refused
// before any of them is read.
func TestLayoutIndexOfTooManyImages(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{}))
	index := ocispec.Index{Manifests: make([]ocispec.Descriptor, maxIndexEntries+1)}
	for i := range index.Manifests {
		index.Manifests[i] = img.Platforms[0].SBOM
	}
	data, err := json.Marshal(index)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ocispec.ImageIndexFile), data, 0o644))

	err = Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{})
	require.ErrorContains(t, err, fmt.Sprintf("lists %d images, more than %d", maxIndexEntries+1, maxIndexEntries))
}

func TestLayoutIndexIsReadAsARegularFile(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{}))
	require.NoError(t, os.Remove(filepath.Join(dir, ocispec.ImageIndexFile)))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ocispec.ImageIndexFile), 0o755))
	err := Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{})
	require.ErrorContains(t, err, "the layout's index")
	require.ErrorContains(t, err, "directory")
}

// A directory that holds files but no oci-layout is no layout: kvgen
// writes nothing in it, and its index.json stays the user's. An empty one
// becomes a layout.
func TestLayoutIsWrittenOnlyInALayoutOrAnEmptyDirectory(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	dir := t.TempDir()
	index := filepath.Join(dir, ocispec.ImageIndexFile)
	require.NoError(t, os.WriteFile(index, []byte(`{"mine": true}`), 0o644))
	err := Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{})
	require.ErrorContains(t, err, `holds "index.json" and no oci-layout: it is no OCI layout`)
	assertUnchanged(t, index, `{"mine": true}`)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "kvgen wrote into a directory that is not a layout")

	empty := t.TempDir()
	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+empty+":t")), Remote{}))
	_, err = Inspect(ctx, must(ParseRef("oci:"+empty+":t")), Remote{}, false)
	require.NoError(t, err)
}

// Builds that write one layout at once take turns: every tag is there at
// the end, and none fails for another's temporary files.
func TestLayoutWritesTakeTurns(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	dir := filepath.Join(t.TempDir(), "layout")
	tags := []string{"a", "b", "c", "d", "e", "f"}
	errs := make(chan error, len(tags))
	for _, tag := range tags {
		go func() { errs <- Write(ctx, img, must(ParseRef("oci:"+dir+":"+tag)), Remote{}) }()
	}
	// Every write ends before the test does, which removes the layout.
	var failed []error
	for range tags {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	require.Empty(t, failed)
	for _, tag := range tags {
		_, err := Inspect(ctx, must(ParseRef("oci:"+dir+":"+tag)), Remote{}, false)
		assert.NoError(t, err, "tag %s", tag)
	}
}

// A build without a tag leaves the layout's other untagged images; a build
// with one replaces whatever the tag named, an artifact too, so that no
// two entries carry one tag.
func TestLayoutTagReplacesOnlyItsOwn(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{}))
	var idx ocispec.Index
	require.NoError(t, json.Unmarshal(must(os.ReadFile(filepath.Join(dir, ocispec.ImageIndexFile))), &idx))
	other := putJSON(t, dir, ocispec.MediaTypeImageManifest, ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: ocispec.DescriptorEmptyJSON, Layers: []ocispec.Descriptor{}})
	require.NoError(t, os.WriteFile(blobFile(dir, ocispec.DescriptorEmptyJSON), ocispec.DescriptorEmptyJSON.Data, 0o644))
	artifact := other
	artifact.ArtifactType = "application/vnd.example.thing"
	artifact.Annotations = map[string]string{ocispec.AnnotationRefName: "t"}
	idx.Manifests = append(idx.Manifests, other, artifact)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ocispec.ImageIndexFile), must(json.Marshal(idx)), 0o644))

	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+dir)), Remote{}))
	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{}))
	idx = ocispec.Index{}
	require.NoError(t, json.Unmarshal(must(os.ReadFile(filepath.Join(dir, ocispec.ImageIndexFile))), &idx))
	tagged, untagged := 0, false
	for _, d := range idx.Manifests {
		if d.Annotations[ocispec.AnnotationRefName] == "t" {
			tagged++
			assert.Empty(t, d.ArtifactType, "the tag still names the artifact")
		}
		untagged = untagged || d.Digest == other.Digest && d.ArtifactType == ""
	}
	assert.Equal(t, 1, tagged)
	assert.True(t, untagged, "the untagged image another tool wrote was dropped")
}

func TestLayoutKeepsADanglingLinkItCouldNotWriteThrough(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	link := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "nowhere", "deeper"), link))
	require.Error(t, Write(ctx, img, must(ParseRef("oci:"+link+":t")), Remote{}))
	fi, err := os.Lstat(link)
	require.NoError(t, err, "the user's link was removed")
	assert.NotZero(t, fi.Mode()&os.ModeSymlink)
}

func TestArchiveWritesItsSBOMOverALinkNotThroughIt(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	archive := filepath.Join(t.TempDir(), "img.tar")
	outside, content := outsideFile(t)
	require.NoError(t, os.Symlink(outside, archive+".sbom.cdx.json"))

	require.NoError(t, Write(ctx, img, must(ParseRef("docker-archive:"+archive)), Remote{}))
	assertUnchanged(t, outside, content)
	fi, err := os.Lstat(archive + ".sbom.cdx.json")
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
}

func TestArchiveIntoADirectoryWritesNothing(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	archive := t.TempDir()
	err := Write(ctx, img, must(ParseRef("docker-archive:"+archive)), Remote{})
	require.ErrorContains(t, err, "is a directory")
	assert.NoFileExists(t, archive+".sbom.cdx.json")
}

// A base whose layer was swapped for other bytes of its size is refused
// when its blobs are copied into a docker archive, as into a layout.
func TestArchiveRefusesABaseBlobWhoseBytesAreWrong(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "base")
	require.NoError(t, Write(ctx, image(t), must(ParseRef("oci:"+dir+":b")), Remote{}))
	opts := options(platforms(t)[:1])
	opts.Base = "oci:" + dir + ":b"
	img, err := Build(ctx, opts)
	require.NoError(t, err)
	m, err := fetchManifest(ctx, image(t), image(t).Platforms[0].Manifest)
	require.NoError(t, err)
	layer := blobFile(dir, m.Layers[0])
	require.NoError(t, os.Chmod(layer, 0o644))
	require.NoError(t, os.WriteFile(layer, make([]byte, m.Layers[0].Size), 0o644))

	archive := filepath.Join(t.TempDir(), "img.tar")
	err = Write(ctx, img, must(ParseRef("docker-archive:"+archive)), Remote{})
	require.ErrorContains(t, err, m.Layers[0].Digest.String())
	assert.NoFileExists(t, archive)
	require.Error(t, Write(ctx, img, must(ParseRef("oci:"+filepath.Join(t.TempDir(), "out"))), Remote{}), "a layout refuses it too")
}

// A base image whose manifest lists, as a layer, a descriptor that claims
// to be an index of a gigabyte is refused when the base is read, before
// that blob is: the walk of an image's blobs reads manifests and indexes
// whole, and follows what they list.
func TestBaseBlobClaimingAHugeIndexIsRefused(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "base")
	require.NoError(t, Write(ctx, image(t), must(ParseRef("oci:"+dir+":b")), Remote{}))
	m, err := fetchManifest(ctx, image(t), image(t).Platforms[0].Manifest)
	require.NoError(t, err)
	big := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromString("big"), Size: 1 << 30}
	m.Layers = append(m.Layers, big)
	setIndex(t, dir, putJSON(t, dir, ocispec.MediaTypeImageManifest, m))

	opts := options(platforms(t)[:1])
	opts.Base = "oci:" + dir + ":t"
	_, err = Build(ctx, opts)
	require.ErrorContains(t, err, fmt.Sprintf("its config or a layer (%s) is a %q", big.Digest, ocispec.MediaTypeImageIndex))
}

// The temporary files a write killed before its renames left in a layout
// go with the next write; files named otherwise stay.
func TestLayoutWriteRemovesStaleTemporaries(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{}))
	stale := []string{filepath.Join(dir, ".index.json.123.tmp"), filepath.Join(dir, "blobs", "sha256", "."+strings.Repeat("a", 64)+".4567.tmp")}
	kept := []string{filepath.Join(dir, ".index.json.x1.tmp"), filepath.Join(dir, "blobs", "sha256", "notes.txt")}
	for _, f := range append(slices.Clone(stale), kept...) {
		require.NoError(t, os.WriteFile(f, []byte("left"), 0o644))
	}
	require.NoError(t, Write(ctx, img, must(ParseRef("oci:"+dir+":t")), Remote{}))
	for _, f := range stale {
		assert.NoFileExists(t, f)
	}
	for _, f := range kept {
		assert.FileExists(t, f)
	}
}

// What a base's manifest says of the base alone does not pass to the image
// built on it: an artifact type. A base whose config and manifest count
// their layers differently is refused: no runtime would unpack the image.
func TestBaseIsReadAsAnImage(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "base")
	require.NoError(t, Write(ctx, image(t), must(ParseRef("oci:"+dir+":b")), Remote{}))
	m, err := fetchManifest(ctx, image(t), image(t).Platforms[0].Manifest)
	require.NoError(t, err)
	m.ArtifactType = SBOMArtifactType
	setIndex(t, dir, putJSON(t, dir, ocispec.MediaTypeImageManifest, m))
	opts := options(platforms(t)[:1])
	opts.Base = "oci:" + dir + ":t"
	img, err := Build(ctx, opts)
	require.NoError(t, err)
	built, err := fetchManifest(ctx, img, img.Platforms[0].Manifest)
	require.NoError(t, err)
	assert.Empty(t, built.ArtifactType)
	assert.Len(t, built.Layers, len(m.Layers)+1)

	var cfg ocispec.Image
	require.NoError(t, json.Unmarshal(must(os.ReadFile(blobFile(dir, m.Config))), &cfg))
	cfg.RootFS.DiffIDs = nil
	m.Config = putJSON(t, dir, ocispec.MediaTypeImageConfig, cfg)
	setIndex(t, dir, putJSON(t, dir, ocispec.MediaTypeImageManifest, m))
	_, err = Build(ctx, opts)
	require.ErrorContains(t, err, fmt.Sprintf("its config lists 0 layers, its manifest %d", len(m.Layers)))
}

// The SBOM beside a docker archive has a name the user did not give: a
// file there that is no SBOM is not replaced, and nothing is written. One
// an earlier build wrote is.
func TestArchiveKeepsAFileWhereItsSBOMGoes(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	archive := filepath.Join(t.TempDir(), "img.tar")
	sbom := archive + ".sbom.cdx.json"
	require.NoError(t, os.WriteFile(sbom, []byte("my notes\n"), 0o644))
	err := Write(ctx, img, must(ParseRef("docker-archive:"+archive)), Remote{})
	require.ErrorContains(t, err, "is there and is no CycloneDX SBOM")
	assertUnchanged(t, sbom, "my notes\n")
	assert.NoFileExists(t, archive)

	require.NoError(t, os.Remove(sbom))
	require.NoError(t, Write(ctx, img, must(ParseRef("docker-archive:"+archive)), Remote{}))
	require.NoError(t, Write(ctx, img, must(ParseRef("docker-archive:"+archive)), Remote{}), "the SBOM of the build before")
	entries, err := os.ReadDir(filepath.Dir(archive))
	require.NoError(t, err)
	assert.Len(t, entries, 2, "the archive and its SBOM, and no temporary file")
}
