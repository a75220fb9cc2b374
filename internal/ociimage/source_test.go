package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
)

// An image kvgen reads, from a layout, an archive or a base, may have been
// made by an attacker: it is read bounded before anything is allocated,
// every blob is checked against its digest and size, and counts and
// nesting are capped.

// writtenLayout is image(t) written as a layout, tagged t.
func writtenLayout(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, Write(context.Background(), image(t), must(ParseRef("oci:"+dir+":t")), Remote{}))
	return dir
}

// putBlob adds a blob to a layout.
func putBlob(t *testing.T, dir, mediaType string, data []byte) ocispec.Descriptor {
	t.Helper()
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	require.NoError(t, os.WriteFile(blobFile(dir, d), data, 0o644))
	return d
}

// putJSON adds v's JSON to a layout as a blob.
func putJSON(t *testing.T, dir, mediaType string, v any) ocispec.Descriptor {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return putBlob(t, dir, mediaType, data)
}

// setIndex makes a layout's index.json list entries, the first tagged t.
func setIndex(t *testing.T, dir string, entries ...ocispec.Descriptor) {
	t.Helper()
	entries[0].Annotations = map[string]string{ocispec.AnnotationRefName: "t"}
	data, err := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: entries})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ocispec.ImageIndexFile), data, 0o644))
}

// allocated is what f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// inspectLayout is inspectErr of the layout's image tagged t.
func inspectLayout(t *testing.T, dir string) error {
	return inspectErr(t, "oci:"+dir+":t", Remote{}, false)
}

// inspectErr is the error of inspecting the image at ref: the image's,
// and its platforms'.
func inspectErr(t *testing.T, ref string, rm Remote, sbom bool) error {
	found, err := Inspect(context.Background(), must(ParseRef(ref)), rm, sbom)
	for _, f := range found {
		err = errors.Join(err, f.Err)
	}
	if err != nil {
		t.Log(err)
	}
	return err
}

// B1: a manifest that says it is a gigabyte, sparse on disk, is refused
// by its size before a byte of it is read; so is a large index.json.
func TestLargeManifestAndIndexAreRefusedUnread(t *testing.T) {
	dir := writtenLayout(t)
	big := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("big"), Size: 1 << 30}
	f, err := os.Create(blobFile(dir, big))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(big.Size))
	require.NoError(t, f.Close())
	setIndex(t, dir, big)
	var ierr error
	assert.Less(t, allocated(func() { ierr = inspectLayout(t, dir) }), uint64(16<<20))
	require.ErrorContains(t, ierr, "more than the 4194304 of a manifest")

	index := filepath.Join(dir, ocispec.ImageIndexFile)
	require.NoError(t, os.Truncate(index, 256<<20))
	assert.Less(t, allocated(func() { ierr = inspectLayout(t, dir) }), uint64(16<<20))
	require.ErrorContains(t, ierr, "larger than 4194304 bytes")
}

// B1, B11: an index inside an index is not followed, and an index of
// more platforms, a layout of more images or an image of more layers
// than kvgen reads is an error before any is read.
func TestCountsAndNestingAreCapped(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	m, err := fetchManifest(ctx, img, img.Platforms[0].Manifest)
	require.NoError(t, err)
	manifest := img.Platforms[0].Manifest

	t.Run("nested", func(t *testing.T) {
		dir := writtenLayout(t)
		inner := putJSON(t, dir, ocispec.MediaTypeImageIndex, ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, Manifests: []ocispec.Descriptor{manifest}})
		outer := putJSON(t, dir, ocispec.MediaTypeImageIndex, ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, Manifests: []ocispec.Descriptor{inner}})
		setIndex(t, dir, outer)
		require.ErrorContains(t, inspectLayout(t, dir), "an image index inside an index")
	})
	t.Run("platforms", func(t *testing.T) {
		dir := writtenLayout(t)
		var many []ocispec.Descriptor
		for i := range maxPlatforms + 1 {
			d := manifest
			d.Platform = &ocispec.Platform{OS: "linux", Architecture: "amd64", Variant: strings.Repeat("v", i+1)}
			many = append(many, d)
		}
		setIndex(t, dir, putJSON(t, dir, ocispec.MediaTypeImageIndex, ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, Manifests: many}))
		require.ErrorContains(t, inspectLayout(t, dir), "65 platforms' images, more than the 64 inspect reads")
	})
	t.Run("index.json", func(t *testing.T) {
		dir := writtenLayout(t)
		many := make([]ocispec.Descriptor, maxIndexEntries+1)
		for i := range many {
			many[i] = manifest
		}
		setIndex(t, dir, many...)
		require.ErrorContains(t, inspectLayout(t, dir), "lists 4097 images, more than 4096")
	})
	t.Run("layers", func(t *testing.T) {
		dir := writtenLayout(t)
		many := m
		many.Layers = nil
		for range maxLayers + 1 {
			many.Layers = append(many.Layers, m.Layers[0])
		}
		setIndex(t, dir, putJSON(t, dir, ocispec.MediaTypeImageManifest, many))
		require.ErrorContains(t, inspectLayout(t, dir), "257 layers, more than 256")
	})
	t.Run("digest", func(t *testing.T) {
		dir := writtenLayout(t)
		bad := m
		bad.Layers = []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: "sha256:../../../../etc/passwd", Size: 10}}
		setIndex(t, dir, putJSON(t, dir, ocispec.MediaTypeImageManifest, bad))
		require.ErrorContains(t, inspectLayout(t, dir), "a descriptor's digest")
	})
}

// B7: a layer swapped for another binary's is found out, whether or not
// it has the declared size, and nothing is reported under the genuine
// digest.
func TestSwappedLayerIsFoundOut(t *testing.T) {
	ctx := context.Background()
	img := image(t)
	m, err := fetchManifest(ctx, img, img.Platforms[0].Manifest)
	require.NoError(t, err)
	genuine := m.Layers[0]
	cfg := ocispec.Image{}
	require.NoError(t, fetchJSON(ctx, img, m.Config, &cfg))
	// Another Go binary at the entrypoint, as small as the genuine one:
	// tiny for arm64, stripped further of what a layer does not need.
	other, err := os.ReadFile(tiny(t, "arm64"))
	require.NoError(t, err)
	var l *layer
	for ; ; other = other[:len(other)*9/10] {
		l, err = writeLayer([]file{{name: cleanPath(cfg.Config.Entrypoint[0]), mode: 0o755, data: other}}, cfg.Created.UTC())
		require.NoError(t, err)
		if len(l.blob) < int(genuine.Size) {
			break
		}
	}

	for name, blob := range map[string][]byte{
		"other size": l.blob,
		// Padded to the declared size: a reader that stops at the tar's
		// end never sees the padding.
		"same size": append(bytes.Clone(l.blob), make([]byte, int(genuine.Size)-len(l.blob))...),
	} {
		t.Run(name, func(t *testing.T) {
			dir := writtenLayout(t)
			path := blobFile(dir, genuine)
			require.NoError(t, os.Chmod(path, 0o644))
			require.NoError(t, os.WriteFile(path, blob, 0o644))
			found, err := Inspect(ctx, must(ParseRef("oci:"+dir+":t")), Remote{}, false)
			require.NoError(t, err)
			require.Len(t, found, 1)
			require.Error(t, found[0].Err)
			assert.Contains(t, found[0].Err.Error(), genuine.Digest.String())
			assert.Nil(t, found[0].Binary)
		})
	}
}

// B11: decompressing layers spends from a budget: a gzip bomb ends with
// an error once it is spent.
func TestDecompressionIsBudgeted(t *testing.T) {
	ctx := context.Background()
	dir := writtenLayout(t)
	l, err := writeLayer([]file{{name: "bomb", mode: 0o644, data: make([]byte, 8<<20)}}, time.Unix(0, 0))
	require.NoError(t, err)
	d := putBlob(t, dir, ocispec.MediaTypeImageLayerGzip, l.blob)
	s, err := openLocal(ctx, must(ParseRef("oci:"+dir+":t")), newBudget())
	require.NoError(t, err)
	b := newBudget()
	b.unpacked.set(1<<20, "bytes of decompressed layers")
	_, err = extract(ctx, s, []ocispec.Descriptor{d}, "usr/local/bin/tiny", io.Discard, b)
	require.ErrorContains(t, err, "more than 1048576 bytes of decompressed layers")
}

// A registry's base is read within the budget a layout's is: every blob
// a build copies into a layout counts, whatever its descriptor claims.
func TestRegistryBaseIsBudgeted(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	blob := make([]byte, 2<<20)
	d := content.NewDescriptorFromBytes(ocispec.MediaTypeImageLayer, blob)
	require.NoError(t, s.Push(ctx, d, bytes.NewReader(blob)))
	b := newBudget()
	b.read.set(1<<20, "bytes of blobs")
	rc, err := budgeted{s, b}.Fetch(ctx, d)
	require.NoError(t, err)
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	require.ErrorContains(t, err, "more than 1048576 bytes of blobs")
}

// A docker archive whose manifest.json, which docker load reads, names
// another image than its index.json, which kvgen reads, is refused.
func TestArchiveWhoseTwoManifestsDisagree(t *testing.T) {
	ctx := context.Background()
	archive := filepath.Join(t.TempDir(), "img.tar")
	require.NoError(t, Write(ctx, image(t), must(ParseRef("docker-archive:"+archive)), Remote{}))
	_, err := Inspect(ctx, must(ParseRef("docker-archive:"+archive)), Remote{}, false)
	require.NoError(t, err)

	rewriteTar(t, archive, func(name string, data []byte) []byte {
		if name != "manifest.json" {
			return data
		}
		var entries []dockerManifestEntry
		require.NoError(t, json.Unmarshal(data, &entries))
		entries[0].Config = entries[0].Layers[0] // any other blob
		return must(json.Marshal(entries))
	})
	_, err = Inspect(ctx, must(ParseRef("docker-archive:"+archive)), Remote{}, false)
	require.ErrorContains(t, err, "manifest.json, which docker load reads, lists an image")
}

// An archive whose manifest.json has docker load tag an image that kvgen
// does not read (one with a subject beside the image, or an index's
// unknown/unknown entry) is refused: kvgen would vouch for one image while
// another is loaded.
func TestArchiveLoadsOnlyWhatInspectReads(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []string{"a subject", "an index's unknown platform", "a named artifact"} {
		t.Run(tc, func(t *testing.T) {
			archive := filepath.Join(t.TempDir(), "img.tar")
			require.NoError(t, Write(ctx, image(t), must(ParseRef("docker-archive:"+archive)), Remote{}))
			files := map[string][]byte{}
			rewriteTar(t, archive, func(name string, data []byte) []byte {
				files[name] = data
				return data
			})
			var idx ocispec.Index
			require.NoError(t, json.Unmarshal(files["index.json"], &idx))
			genuine := idx.Manifests[0]
			var m ocispec.Manifest
			require.NoError(t, json.Unmarshal(files[blobPath(genuine)], &m))
			// Another image: the same layers under another config.
			other := m
			other.Config = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: m.Layers[0].Digest, Size: m.Layers[0].Size}
			if tc != "an index's unknown platform" {
				other.Subject = &genuine
			}
			data := must(json.Marshal(other))
			od := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(data), Size: int64(len(data))}
			add := map[string][]byte{blobPath(od): data}
			switch tc {
			case "a subject":
				idx.Manifests = append(idx.Manifests, od)
			case "a named artifact":
				// manifest.json as it was; containerd's image store
				// reads index.json, and would load this as the image.
				od.Annotations = map[string]string{"io.containerd.image.name": "docker.io/library/kvserver:edge"}
				idx.Manifests = append(idx.Manifests, od)
			default:
				genuine.Platform = &ocispec.Platform{OS: "linux", Architecture: "amd64"}
				od.Platform = &ocispec.Platform{OS: "unknown", Architecture: "unknown"}
				list := must(json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{genuine, od}}))
				ld := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromBytes(list), Size: int64(len(list))}
				add[blobPath(ld)] = list
				idx.Manifests = []ocispec.Descriptor{ld}
			}
			var entries []dockerManifestEntry
			require.NoError(t, json.Unmarshal(files["manifest.json"], &entries))
			evil := dockerManifestEntry{Config: blobPath(other.Config), RepoTags: []string{"kvserver:edge"}}
			for _, l := range other.Layers {
				evil.Layers = append(evil.Layers, blobPath(l))
			}
			switch tc {
			case "a subject":
				entries[0].RepoTags = nil
				entries = append(entries, evil)
			case "an index's unknown platform":
				entries = []dockerManifestEntry{evil}
			}
			rewriteTar(t, archive, func(name string, data []byte) []byte {
				switch name {
				case "index.json":
					return must(json.Marshal(idx))
				case "manifest.json":
					return must(json.Marshal(entries))
				}
				return data
			})
			addToTar(t, archive, add)
			_, err := Inspect(ctx, must(ParseRef("docker-archive:"+archive)), Remote{}, false)
			if tc == "a named artifact" {
				require.ErrorContains(t, err, `index.json names `+od.Digest.String()+` ("docker.io/library/kvserver:edge"), which is no image kvgen reads`)
				return
			}
			require.ErrorContains(t, err, "manifest.json, which docker load reads, lists an image")
		})
	}
}

// addToTar adds regular files to the end of a tarball.
func addToTar(t *testing.T, name string, files map[string][]byte) {
	t.Helper()
	var extra []tarEntry
	for _, p := range slices.Sorted(maps.Keys(files)) {
		extra = append(extra, tarEntry{tar.Header{Typeflag: tar.TypeReg, Name: p, Size: int64(len(files[p])), Mode: 0o644}, files[p]})
	}
	rewriteEntries(t, name, func(_ *tar.Header, data []byte) []byte { return data }, extra...)
}

// An archive that holds a file twice, or a sparse one, is refused: which
// of the two a reader takes would be anyone's guess.
func TestArchiveWithAFileTwice(t *testing.T) {
	ctx := context.Background()
	archive := filepath.Join(t.TempDir(), "img.tar")
	require.NoError(t, Write(ctx, image(t), must(ParseRef("docker-archive:"+archive)), Remote{}))
	data, err := os.ReadFile(archive)
	require.NoError(t, err)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "index.json", Size: 2, Mode: 0o644}))
	_, err = tw.Write([]byte("{}"))
	require.NoError(t, err)
	require.NoError(t, tw.Flush())
	require.NoError(t, os.WriteFile(archive, append(b.Bytes(), data...), 0o644))
	_, err = Inspect(ctx, must(ParseRef("docker-archive:"+archive)), Remote{}, false)
	require.ErrorContains(t, err, `holds "index.json" twice`)
}

// Links in an archive: docker save links its legacy layer paths to the
// blobs, which is read as before; a link where an image's own file
// belongs, or one listed after a file of its name, would have docker load
// read another file than kvgen does, and is refused.
func TestArchiveLinks(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		add  []tar.Header
		want string
	}{
		{"legacy layer path", []tar.Header{{Typeflag: tar.TypeSymlink, Name: "0123abcd/layer.tar", Linkname: "../blobs/sha256/0123"}}, ""},
		{"index.json as a link", []tar.Header{{Typeflag: tar.TypeSymlink, Name: "./index.json", Linkname: "evil.json"}}, `holds "index.json" twice`},
		{"manifest.json as a hard link", []tar.Header{{Typeflag: tar.TypeLink, Name: "manifest.json", Linkname: "evil.json"}}, `holds "manifest.json" twice`},
		{"a blob as a link", []tar.Header{{Typeflag: tar.TypeSymlink, Name: "blobs/sha256/0123", Linkname: "evil"}}, `"blobs/sha256/0123" is a link, where an image's own file belongs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			archive := filepath.Join(t.TempDir(), "img.tar")
			require.NoError(t, Write(ctx, image(t), must(ParseRef("docker-archive:"+archive)), Remote{}))
			appendTar(t, archive, tc.add...)
			_, err := Inspect(ctx, must(ParseRef("docker-archive:"+archive)), Remote{}, false)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}

	t.Run("manifest.json only as a link", func(t *testing.T) {
		archive := filepath.Join(t.TempDir(), "img.tar")
		require.NoError(t, Write(ctx, image(t), must(ParseRef("docker-archive:"+archive)), Remote{}))
		renameInTar(t, archive, "manifest.json", "evil.json")
		appendTar(t, archive, tar.Header{Typeflag: tar.TypeSymlink, Name: "manifest.json", Linkname: "evil.json"})
		_, err := Inspect(ctx, must(ParseRef("docker-archive:"+archive)), Remote{}, false)
		require.ErrorContains(t, err, `"manifest.json" is a link, where an image's own file belongs`)
	})
}

// appendTar adds entries without content at the end of a tarball.
func appendTar(t *testing.T, name string, headers ...tar.Header) {
	t.Helper()
	extra := make([]tarEntry, len(headers))
	for i, h := range headers {
		extra[i].Header = h
	}
	rewriteEntries(t, name, func(_ *tar.Header, data []byte) []byte { return data }, extra...)
}

// renameInTar renames the tarball's entry from to to.
func renameInTar(t *testing.T, name, from, to string) {
	t.Helper()
	rewriteEntries(t, name, func(h *tar.Header, data []byte) []byte {
		if h.Name == from {
			h.Name = to
		}
		return data
	})
}

// rewriteTar rewrites each regular file of a tarball through edit.
func rewriteTar(t *testing.T, name string, edit func(name string, data []byte) []byte) {
	t.Helper()
	rewriteEntries(t, name, func(h *tar.Header, data []byte) []byte {
		if h.Typeflag == tar.TypeReg {
			data = edit(h.Name, data)
			h.Size = int64(len(data))
		}
		return data
	})
}

// tarEntry is an entry of a tarball: its header and its content.
type tarEntry struct {
	tar.Header
	data []byte
}

// rewriteEntries rewrites each entry of a tarball through edit, which may
// change its header, and adds extra at the end.
func rewriteEntries(t *testing.T, name string, edit func(h *tar.Header, data []byte) []byte, extra ...tarEntry) {
	t.Helper()
	in, err := os.ReadFile(name)
	require.NoError(t, err)
	var out bytes.Buffer
	tr := tar.NewReader(bytes.NewReader(in))
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		data = edit(h, data)
		require.NoError(t, tw.WriteHeader(h))
		_, err = tw.Write(data)
		require.NoError(t, err)
	}
	for _, e := range extra {
		require.NoError(t, tw.WriteHeader(&e.Header))
		_, err = tw.Write(e.data)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, os.WriteFile(name, out.Bytes(), 0o644))
}

// A layer above the entrypoint's hides it as a container's filesystem
// does (its whiteout, an opaque directory or a parent's whiteout on its
// path, a parent that is no directory), and one that would make the
// container run another file than inspect reads is refused: a parent made
// a symbolic link, the file twice in one layer.
func TestUpperLayersHideTheEntrypoint(t *testing.T) {
	ctx := context.Background()
	dir := writtenLayout(t)
	const name = "usr/local/bin/kvserver"
	layer := func(hs ...*tar.Header) ocispec.Descriptor { return tarLayer(t, dir, hs...) }
	lower := layer(reg(name, 3))
	cases := []struct {
		name  string
		upper ocispec.Descriptor
		size  int64  // what is read, or
		err   string // why not
	}{
		{"its whiteout", layer(reg("usr/local/bin/.wh.kvserver", 0)), 0, errDeleted.Error()},
		{"an opaque directory on its path", layer(reg("usr/local/bin/.wh..wh..opq", 0)), 0, errDeleted.Error()},
		{"a parent's whiteout", layer(reg("usr/local/.wh.bin", 0)), 0, errDeleted.Error()},
		{"a parent replaced by a file", layer(reg("usr/local", 0)), 0, errDeleted.Error()},
		{"a parent made a symbolic link", layer(&tar.Header{Name: "usr/local/bin", Typeflag: tar.TypeSymlink, Linkname: "/opt/other", Mode: 0o777}), 0, `is reached through "/usr/local/bin", a symbolic link`},
		{"twice in one layer", layer(reg(name, 1), reg(name, 2)), 0, "twice"},
		{"with a parent made a file after it in its layer", layer(reg(name, 5), reg("usr/local", 0)), 0, `makes "/usr/local", on its path, no directory`},
		{"with a parent made a file before it in its layer", layer(reg("usr/local", 0), reg(name, 5)), 0, `makes "/usr/local", on its path, no directory`},
		{"the file and its opaque directory in one layer", layer(reg("usr/local/bin/.wh..wh..opq", 0), reg(name, 5)), 5, ""},
		{"another file's whiteout", layer(reg("usr/local/bin/.wh.kvserve", 0)), 3, ""},
		{"a directory on its path", layer(&tar.Header{Name: "usr/local/", Typeflag: tar.TypeDir, Mode: 0o755}), 3, ""},
	}
	s, err := openLocal(ctx, must(ParseRef("oci:"+dir+":t")), newBudget())
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := extract(ctx, s, []ocispec.Descriptor{lower, c.upper}, name, io.Discard, newBudget())
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.size, n)
		})
	}
}

// tarLayer puts in the layout at dir an uncompressed layer of the entries
// hs, each regular file of zeros.
func tarLayer(t *testing.T, dir string, hs ...*tar.Header) ocispec.Descriptor {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write(make([]byte, h.Size))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return putBlob(t, dir, ocispec.MediaTypeImageLayer, buf.Bytes())
}

// reg is the header of a regular file of size bytes at p.
func reg(p string, size int64) *tar.Header {
	return &tar.Header{Name: p, Size: size, Mode: 0o755, Typeflag: tar.TypeReg}
}

// A layer below the one with the entrypoint that makes a directory on its
// path a symbolic link puts the file elsewhere when the layers are
// unpacked (and another file may be there, as here), unless the layer with
// the file makes that directory again before it.
func TestLowerLayersCannotMoveTheEntrypoint(t *testing.T) {
	ctx := context.Background()
	dir := writtenLayout(t)
	const name = "usr/local/bin/kvserver"
	layer := func(hs ...*tar.Header) ocispec.Descriptor { return tarLayer(t, dir, hs...) }
	dirEntry := func(p string) *tar.Header { return &tar.Header{Name: p, Typeflag: tar.TypeDir, Mode: 0o755} }
	link := func(p string) *tar.Header {
		return &tar.Header{Name: p, Typeflag: tar.TypeSymlink, Linkname: "/opt", Mode: 0o777}
	}
	// The file the link would lead to, after the binary in its layer.
	upper := layer(reg(name, 3), reg("opt/kvserver", 9))
	zstd := putBlob(t, dir, "application/vnd.oci.image.layer.v1.tar+zstd", []byte("not read"))
	cases := []struct {
		name   string
		layers []ocispec.Descriptor
		size   int64  // what is read, or
		err    string // why not
	}{
		{"a link right below", []ocispec.Descriptor{layer(link("usr/local/bin")), upper}, 0, `is reached through "/usr/local/bin", a symbolic link in a layer below it`},
		{"a link two layers below", []ocispec.Descriptor{layer(link("usr/local")), layer(reg("etc/passwd", 1)), upper}, 0, `is reached through "/usr/local", a symbolic link in a layer below it`},
		{"a file below", []ocispec.Descriptor{layer(reg("usr/local", 1)), upper}, 0, `makes "/usr/local", on its path, no directory`},
		{"a link made a directory again below", []ocispec.Descriptor{layer(link("usr/local/bin")), layer(dirEntry("usr/local/bin/")), upper}, 3, ""},
		{"a link its layer makes a directory again first", []ocispec.Descriptor{layer(link("usr/local/bin")), layer(dirEntry("usr/local/bin/"), reg(name, 3))}, 3, ""},
		{"a directory below made a link after", []ocispec.Descriptor{layer(dirEntry("usr/local/bin/"), link("usr/local/bin")), upper}, 0, "a symbolic link in a layer below it"},
		{"directories below", []ocispec.Descriptor{layer(dirEntry("usr/"), dirEntry("usr/local/"), link("usr/lib")), upper}, 3, ""},
		// As kvgen's own layer has them: the layers below are not read,
		// not even one of a kind inspect does not read.
		{"its layer makes every directory first", []ocispec.Descriptor{zstd, layer(dirEntry("usr/"), dirEntry("usr/local/"), dirEntry("usr/local/bin/"), reg(name, 3))}, 3, ""},
	}
	s, err := openLocal(ctx, must(ParseRef("oci:"+dir+":t")), newBudget())
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := extract(ctx, s, c.layers, name, io.Discard, newBudget())
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.size, n)
		})
	}
}

// An index that lists one image many times is read as one image, and an
// image with more than one SBOM attached has none printed: kvgen cannot
// tell which describes its binary.
func TestOneImageListedManyTimesAndTwoSBOMs(t *testing.T) {
	ctx := context.Background()
	dir := writtenLayout(t)
	ref := "oci:" + dir + ":t"
	found, err := Inspect(ctx, must(ParseRef(ref)), Remote{}, true)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.NoError(t, found[0].Err)
	want := found[0].SBOM

	data, err := os.ReadFile(filepath.Join(dir, ocispec.ImageIndexFile))
	require.NoError(t, err)
	var idx ocispec.Index
	require.NoError(t, json.Unmarshal(data, &idx))
	var rest []ocispec.Descriptor
	var sbom ocispec.Descriptor
	for _, d := range idx.Manifests {
		if d.Annotations[ocispec.AnnotationRefName] == "t" {
			continue
		}
		if d.ArtifactType == SBOMArtifactType {
			sbom = d
		}
		rest = append(rest, d)
	}
	require.NotEmpty(t, sbom.Digest)
	many := make([]ocispec.Descriptor, 50)
	for i := range many {
		many[i] = found[0].Manifest
	}
	list := putJSON(t, dir, ocispec.MediaTypeImageIndex, ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: many})
	setIndex(t, dir, append([]ocispec.Descriptor{list}, rest...)...)
	found, err = Inspect(ctx, must(ParseRef(ref)), Remote{}, true)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.NoError(t, found[0].Err)
	assert.Equal(t, want, found[0].SBOM)

	// A second SBOM for the same image.
	var m ocispec.Manifest
	rc, err := os.ReadFile(blobFile(dir, sbom))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(rc, &m))
	m.Annotations = map[string]string{"org.example.forged": "yes"}
	second := putJSON(t, dir, ocispec.MediaTypeImageManifest, m)
	second.ArtifactType = SBOMArtifactType
	setIndex(t, dir, append([]ocispec.Descriptor{list, second}, rest...)...)
	found, err = Inspect(ctx, must(ParseRef(ref)), Remote{}, true)
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.Nil(t, found[0].SBOM)
	require.ErrorContains(t, found[0].Err, "2 SBOMs are attached to it")
	assert.ErrorContains(t, found[0].Err, second.Digest.String())
}

// An index entry's platform is what a runtime picks the image by; an
// image whose config says another platform is refused, not shown under
// the config's.
func TestPlatformOfTheIndexAndTheConfigAgree(t *testing.T) {
	ctx := context.Background()
	dir := writtenLayout(t)
	ref := must(ParseRef("oci:" + dir + ":t"))
	found, err := Inspect(ctx, ref, Remote{}, false)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.NoError(t, found[0].Err)
	m := found[0].Manifest
	other := "arm64"
	if found[0].Platform.Architecture == other {
		other = "amd64"
	}
	m.Platform = &ocispec.Platform{OS: found[0].Platform.OS, Architecture: other}
	list := putJSON(t, dir, ocispec.MediaTypeImageIndex, ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{m}})
	setIndex(t, dir, list)
	found, err = Inspect(ctx, ref, Remote{}, false)
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.Nil(t, found[0].Binary)
	assert.ErrorContains(t, found[0].Err, `its index lists it for "linux/`+other+`", and its config says`)
}

// A size below zero is no room in a budget: an SBOM's descriptor that
// declares one cannot lift the bound on the SBOMs one inspect keeps.
func TestNegativeSizesAreRefused(t *testing.T) {
	b := newBudget()
	require.Error(t, b.sboms.spend(-1<<62))
	require.Error(t, b.sboms.spend(maxSBOMs+1), "the refused spend added nothing")
	d := ocispec.Descriptor{MediaType: SBOMArtifactType, Digest: digest.FromString("x"), Size: -1}
	assert.ErrorContains(t, checkDigest(d), "a size of -1 bytes")
}

// The SBOM beside a docker archive is read from the archive's directory:
// a link there that leads out of it is not followed (to a credentials
// file, say), and the SBOM is read once for all the archive's platforms.
func TestArchiveSBOMStaysInItsDirectory(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "img.tar")
	require.NoError(t, Write(context.Background(), image(t), must(ParseRef("docker-archive:"+archive)), Remote{}))
	ref := must(ParseRef("docker-archive:" + archive))
	b := newBudget()
	data, err := sidecarSBOM(ref, b)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"bomFormat": "CycloneDX"`)
	assert.Equal(t, int64(maxSBOMs)-int64(len(data)), b.sboms.left.Load())
	again, err := sidecarSBOM(ref, b)
	require.NoError(t, err)
	assert.Equal(t, data, again)
	assert.Equal(t, int64(maxSBOMs)-int64(len(data)), b.sboms.left.Load(), "read and counted once")

	secret := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(secret, []byte(`{"auths":{"r.example":{"auth":"c2VjcmV0"}}}`), 0o600))
	require.NoError(t, os.Remove(archive+".sbom.cdx.json"))
	require.NoError(t, os.Symlink(secret, archive+".sbom.cdx.json"))
	data, err = sidecarSBOM(ref, newBudget())
	require.Error(t, err)
	assert.Nil(t, data)
	require.NoError(t, os.Remove(archive+".sbom.cdx.json"))
	_, err = sidecarSBOM(ref, newBudget())
	assert.ErrorContains(t, err, "no SBOM beside it")
}

// The SBOM beside a docker archive, which no digest binds to it, is
// printed only when it is the SBOM kvgen makes of the archive's binary:
// another binary's (an archive rebuilt beside a stale SBOM), an edited
// one, another tool's and no JSON are each refused, and the binary is
// still read.
func TestArchiveSBOMMustDescribeItsBinary(t *testing.T) {
	ctx := context.Background()
	archive := filepath.Join(t.TempDir(), "img.tar")
	ref := must(ParseRef("docker-archive:" + archive))
	require.NoError(t, Write(ctx, image(t), ref, Remote{}))
	found, err := Inspect(ctx, ref, Remote{}, true)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.NoError(t, found[0].Err)
	genuine := found[0].SBOM
	require.NotEmpty(t, genuine)
	other := index(t).Platforms[1].SBOMData
	require.NotEqual(t, genuine, other)

	for name, c := range map[string]struct {
		sbom []byte
		want string
	}{
		"another binary's": {other, "its SBOM does not describe its binary: from line "},
		"edited":           {bytes.Replace(genuine, []byte(`"specVersion": "1.6"`), []byte(`"specVersion": "1.5"`), 1), "from line 3 it differs"},
		"another tool's":   {[]byte(`{"bomFormat":"CycloneDX","specVersion":"1.6","metadata":{"tools":{"components":[{"type":"application","name":"syft"}]}}}`), "names no kvgen among its tools"},
		"no JSON":          {[]byte("not JSON"), "is not CycloneDX JSON"},
	} {
		require.NoError(t, os.WriteFile(archive+".sbom.cdx.json", c.sbom, 0o644))
		found, err := Inspect(ctx, ref, Remote{}, true)
		require.NoError(t, err, name)
		require.Len(t, found, 1, name)
		assert.Nil(t, found[0].SBOM, name)
		assert.NotNil(t, found[0].Binary, name)
		assert.ErrorContains(t, found[0].Err, c.want, name)
	}
}

// Reading which kvgen an attached SBOM names costs what its bytes cost:
// millions of empty tools, a value nested past what JSON decoding allows
// and a version of megabytes are refused without growing with them.
func TestHostileSBOMToolsAreRefusedCheaply(t *testing.T) {
	many := []byte(`{"metadata":{"tools":{"components":[` + strings.Repeat(`{},`, 4<<20) + `{}]}}}`)
	var err error
	grew := allocated(func() { _, err = toolVersion(many) })
	assert.ErrorContains(t, err, "lists more than 64 tools")
	assert.Less(t, grew, uint64(1<<20), "decoded one tool at a time")

	deep := []byte(`{"bomFormat":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`)
	_, err = toolVersion(deep)
	assert.ErrorContains(t, err, "is not CycloneDX JSON")

	long := []byte(`{"metadata":{"tools":{"components":[{"name":"kvgen","version":"` + strings.Repeat("v", 1<<20) + `"}]}}}`)
	_, err = toolVersion(long)
	assert.ErrorContains(t, err, "names a kvgen version of 1048576 bytes")

	// Tools in several arrays count together, and keys are bounded.
	repeated := []byte(`{"metadata":{"tools":{` + strings.Repeat(`"components":[`+strings.Repeat(`{},`, 40)+`{}],`, 3) + `"x":1}}}`)
	_, err = toolVersion(repeated)
	assert.ErrorContains(t, err, "lists more than 64 tools")
	keys := []byte(`{` + strings.Repeat(`"a":0,`, 100000) + `"b":0}`)
	_, err = toolVersion(keys)
	assert.ErrorContains(t, err, "an object of more than 64 keys")

	// A value where an object belongs is named by its kind, not quoted.
	hostile := []byte(`{"metadata":{"tools":{"components":"\u001b[2J\rkvgen: SBOM verified` + strings.Repeat("y", 1<<20) + `"}}}`)
	_, err = toolVersion(hostile)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 200)
	assert.NotContains(t, err.Error(), "verified")
	assert.ErrorContains(t, err, "want [, found a string")

	v, err := toolVersion([]byte(`{"bomFormat":"CycloneDX","metadata":{"component":{"name":"x"},"tools":{"components":[{"name":"syft","version":"1"},{"name":"kvgen","version":"v1.2.3"}]}}}`))
	require.NoError(t, err)
	assert.Equal(t, "v1.2.3", v)
}

// An SBOM attached to an image in a layout is printed only when it
// describes the image's binary: a referrer names its subject as anyone
// who can write the layout, or push to a registry's repository, names it.
func TestAttachedSBOMMustDescribeItsBinary(t *testing.T) {
	ctx := context.Background()
	dir := writtenLayout(t)
	ref := must(ParseRef("oci:" + dir + ":t"))
	data, err := os.ReadFile(filepath.Join(dir, ocispec.ImageIndexFile))
	require.NoError(t, err)
	var idx ocispec.Index
	require.NoError(t, json.Unmarshal(data, &idx))
	i := slices.IndexFunc(idx.Manifests, func(d ocispec.Descriptor) bool { return d.ArtifactType == SBOMArtifactType })
	require.GreaterOrEqual(t, i, 0)
	var m ocispec.Manifest
	data, err = os.ReadFile(blobFile(dir, idx.Manifests[i]))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &m))
	require.Len(t, m.Layers, 1)
	m.Layers[0] = putBlob(t, dir, SBOMArtifactType, index(t).Platforms[1].SBOMData)
	forged := putJSON(t, dir, ocispec.MediaTypeImageManifest, m)
	forged.ArtifactType = SBOMArtifactType
	entries := slices.Clone(idx.Manifests)
	entries[i] = forged
	tagged := slices.IndexFunc(entries, func(d ocispec.Descriptor) bool { return d.Annotations[ocispec.AnnotationRefName] == "t" })
	require.GreaterOrEqual(t, tagged, 0)
	entries[0], entries[tagged] = entries[tagged], entries[0]
	setIndex(t, dir, entries...)

	found, err := Inspect(ctx, ref, Remote{}, true)
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.Nil(t, found[0].SBOM)
	assert.NotNil(t, found[0].Binary)
	assert.ErrorContains(t, found[0].Err, "its SBOM does not describe its binary")
}

// A base is refused where it says two things or leaves no room, and of its
// layers' descriptors the image keeps only which blob each is: an index
// that lists an image for one platform whose config says another (a
// runtime picks it by the one and runs the other); a base of maxLayers
// layers, which kvgen's own would make an image inspect refuses; a layer
// descriptor with data of its own or URLs to fetch it from elsewhere.
func TestBaseIsCheckedBeforeItIsUsed(t *testing.T) {
	ctx := context.Background()
	dir := writtenLayout(t)
	s, err := openLocal(ctx, must(ParseRef("oci:"+dir+":t")), newBudget())
	require.NoError(t, err)
	root := s.index.Manifests[0]
	m, err := fetchManifest(ctx, s, root)
	require.NoError(t, err)
	var cfg ocispec.Image
	require.NoError(t, fetchJSON(ctx, s, m.Config, &cfg))
	amd64 := &ocispec.Platform{OS: "linux", Architecture: "amd64"}
	withBase := func(p Platform, entry ocispec.Descriptor) (*Image, error) {
		setIndex(t, dir, putJSON(t, dir, ocispec.MediaTypeImageIndex, ocispec.Index{
			Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{entry},
		}))
		opts := options([]Platform{p})
		opts.Base = "oci:" + dir + ":t"
		return Build(ctx, opts)
	}
	manifestOf := func(m ocispec.Manifest, cfg ocispec.Image, platform *ocispec.Platform) ocispec.Descriptor {
		m.Config = putJSON(t, dir, ocispec.MediaTypeImageConfig, cfg)
		d := putJSON(t, dir, ocispec.MediaTypeImageManifest, m)
		d.Platform = platform
		return d
	}

	arm := platforms(t)[1]
	_, err = withBase(arm, manifestOf(m, cfg, &ocispec.Platform{OS: "linux", Architecture: "arm64"}))
	require.ErrorContains(t, err, `its index lists an image for linux/arm64, whose config says "linux/amd64"`)
	// CheckBase, before anything is compiled, says so too.
	err = CheckBase(ctx, "oci:"+dir+":t", []Platform{arm}, Remote{})
	require.ErrorContains(t, err, `its index lists an image for linux/arm64, whose config says "linux/amd64"`)

	many, manyCfg := m, cfg
	many.Layers = slices.Repeat(m.Layers[:1], maxLayers)
	manyCfg.RootFS.DiffIDs = slices.Repeat(cfg.RootFS.DiffIDs[:1], maxLayers)
	_, err = withBase(platforms(t)[0], manifestOf(many, manyCfg, amd64))
	require.ErrorContains(t, err, "it has 256 layers, and an image kvgen makes at most 256 with its own")

	odd := m
	odd.Layers = slices.Clone(m.Layers)
	odd.Layers[0].Data = []byte("EVIL")
	odd.Layers[0].URLs = []string{"http://evil.example/x"}
	img, err := withBase(platforms(t)[0], manifestOf(odd, cfg, amd64))
	require.NoError(t, err)
	out, err := fetchManifest(ctx, img, img.Root)
	require.NoError(t, err)
	assert.Equal(t, m.Layers[0].Digest, out.Layers[0].Digest)
	assert.Nil(t, out.Layers[0].Data)
	assert.Nil(t, out.Layers[0].URLs)
}
