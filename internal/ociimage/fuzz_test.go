package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxFuzzAlloc bounds what one read of a fuzzed image may allocate: the
// inputs are small, and every bound of the reader is far below it, but a
// size or count believed from the input would pass it.
const maxFuzzAlloc = 64 << 20

// genuineFiles are the files of image(t) as a docker archive.
func genuineFiles(t testing.TB) map[string][]byte {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "img.tar")
	require.NoError(t, Write(context.Background(), image(t), must(ParseRef("docker-archive:"+archive)), Remote{}))
	files := map[string][]byte{}
	data, err := os.ReadFile(archive)
	require.NoError(t, err)
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeReg {
			files[h.Name] = must(io.ReadAll(tr))
		}
	}
}

// checkFound fails if an image was reported under a digest its manifest's
// bytes, as blob reads them, do not have.
func checkFound(t *testing.T, found []Found, blob func(d ocispec.Descriptor) []byte) {
	for _, f := range found {
		if f.Binary == nil {
			continue
		}
		sum := sha256.Sum256(blob(f.Manifest))
		if digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(sum[:])) != f.Manifest.Digest {
			t.Fatalf("reported %s, whose bytes are not its digest's", f.Manifest.Digest)
		}
	}
}

// FuzzArchive reads any bytes as a docker archive: no panic, memory
// bounded, and nothing reported under a digest its bytes do not have.
func FuzzArchive(f *testing.F) {
	files := genuineFiles(f)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, name := range []string{"oci-layout", "index.json", "manifest.json"} {
		require.NoError(f, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(files[name])), Mode: 0o644}))
		must(tw.Write(files[name]))
	}
	for name, data := range files {
		if strings.HasPrefix(name, "blobs/") {
			require.NoError(f, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o644}))
			must(tw.Write(data))
		}
	}
	require.NoError(f, tw.Close())
	f.Add(b.Bytes())
	f.Add(b.Bytes()[:4096])
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "img.tar")
		require.NoError(t, os.WriteFile(path, data, 0o644))
		var found []Found
		if a := allocated(func() {
			found, _ = Inspect(context.Background(), must(ParseRef("docker-archive:"+path)), Remote{}, false)
		}); a > maxFuzzAlloc {
			t.Fatalf("allocated %d bytes", a)
		}
		checkFound(t, found, func(d ocispec.Descriptor) []byte {
			var blob []byte
			tr := tar.NewReader(bytes.NewReader(data))
			for {
				h, err := tr.Next()
				if err != nil {
					return blob
				}
				if cleanPath(h.Name) == blobPath(d) {
					blob, _ = io.ReadAll(tr)
				}
			}
		})
	})
}

// FuzzLayout reads any index.json, manifest and config in an OCI layout
// that holds the genuine layer: each blob is stored under its own digest
// and under the genuine one's, so a reference to the genuine image finds
// other bytes. No panic, memory bounded, and nothing reported under a
// digest its bytes do not have.
func FuzzLayout(f *testing.F) {
	files := genuineFiles(f)
	var index ocispec.Index
	require.NoError(f, json.Unmarshal(files["index.json"], &index))
	manifestFile := blobPath(index.Manifests[0])
	var m ocispec.Manifest
	require.NoError(f, json.Unmarshal(files[manifestFile], &m))
	configFile := blobPath(m.Config)
	f.Add(files["index.json"], files[manifestFile], files[configFile])
	f.Add([]byte(`{"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"`+index.Manifests[0].Digest.String()+`","size":1}]}`), files[manifestFile], files[configFile])
	f.Fuzz(func(t *testing.T, indexJSON, manifest, config []byte) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755))
		write := func(name string, data []byte) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), data, 0o644))
		}
		write("oci-layout", files["oci-layout"])
		write("index.json", indexJSON)
		for name, data := range files {
			if strings.HasPrefix(name, "blobs/") {
				write(name, data)
			}
		}
		for _, blob := range []struct {
			genuine string
			data    []byte
		}{{manifestFile, manifest}, {configFile, config}} {
			write(blob.genuine, blob.data)
			write(blobPath(ocispec.Descriptor{Digest: digest.FromBytes(blob.data)}), blob.data)
		}
		var found []Found
		if a := allocated(func() { found, _ = Inspect(context.Background(), must(ParseRef("oci:"+dir)), Remote{}, false) }); a > maxFuzzAlloc {
			t.Fatalf("allocated %d bytes", a)
		}
		checkFound(t, found, func(d ocispec.Descriptor) []byte {
			data, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(blobPath(d))))
			return data
		})
	})
}

// A small index.json, manifest or config of many small values is refused
// before it is decoded, within the memory bound: 4 MiB of "{}," decoded
// into descriptors or history entries came to hundreds of megabytes.
func TestManySmallJSONValuesAreRefusedBeforeDecoding(t *testing.T) {
	files := genuineFiles(t)
	var index ocispec.Index
	require.NoError(t, json.Unmarshal(files["index.json"], &index))
	var m ocispec.Manifest
	require.NoError(t, json.Unmarshal(files[blobPath(index.Manifests[0])], &m))
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(files[blobPath(m.Config)], &cfg))

	empties := strings.Repeat("{},", (maxJSON-1024)/3) + "{}"
	layout := func(indexJSON []byte, blobs ...[]byte) string {
		dir := t.TempDir()
		for name, data := range files {
			if name == "oci-layout" || strings.HasPrefix(name, "blobs/") {
				require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
			}
		}
		for _, b := range blobs {
			require.NoError(t, os.WriteFile(filepath.Join(dir, blobPath(ocispec.Descriptor{Digest: digest.FromBytes(b)})), b, 0o644))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "index.json"), indexJSON, 0o644))
		return dir
	}
	indexOf := func(manifest []byte) []byte {
		return must(json.Marshal(ocispec.Index{Manifests: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(manifest), Size: int64(len(manifest))}}}))
	}
	manyLayers := []byte(`{"schemaVersion":2,"mediaType":"` + ocispec.MediaTypeImageManifest + `","layers":[` + empties + `]}`)
	cfg["history"] = json.RawMessage("[" + empties + "]")
	config := must(json.Marshal(cfg))
	m.Config.Digest, m.Config.Size = digest.FromBytes(config), int64(len(config))
	manifest := must(json.Marshal(m))

	for name, dir := range map[string]string{
		"index.json": layout([]byte(`{"manifests":[` + empties + `]}`)),
		// A number no float64 holds does not stop the count.
		"index.json with 1e400": layout([]byte(`{"x":1e400,"manifests":[` + empties + `]}`)),
		"manifest":              layout(indexOf(manyLayers), manyLayers),
		"config":                layout(indexOf(manifest), manifest, config),
	} {
		var err error
		a := allocated(func() {
			var found []Found
			found, err = Inspect(context.Background(), must(ParseRef("oci:"+dir)), Remote{}, false)
			for _, f := range found {
				err = errors.Join(err, f.Err)
			}
		})
		require.ErrorContains(t, err, "JSON values, more than any image's", name)
		require.Less(t, a, uint64(maxFuzzAlloc), "%s: allocated", name)
	}
}

// bytesFetcher serves the same bytes for any descriptor, as a registry
// that ignores what it was asked for does.
type bytesFetcher []byte

func (b bytesFetcher) Fetch(context.Context, ocispec.Descriptor) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b)), nil
}

// A manifest or config whose bytes are not what its descriptor says is an
// error that names the blob and what is wrong: oras' own words, "trailing
// data", named neither.
func TestFetchedJSONThatIsNotItsDescriptorsIsNamed(t *testing.T) {
	ctx := context.Background()
	want := []byte(`{}`)
	d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(want), Size: int64(len(want))}
	var v map[string]any
	require.NoError(t, fetchJSON(ctx, bytesFetcher(want), d, &v))
	assert.EqualError(t, fetchJSON(ctx, bytesFetcher(`{}{"endless":true}`), d, &v), d.Digest.String()+" holds more than the 2 bytes its descriptor says")
	assert.EqualError(t, fetchJSON(ctx, bytesFetcher(`[]`), d, &v), d.Digest.String()+": mismatched digest")
}
