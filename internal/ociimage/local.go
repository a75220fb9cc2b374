package ociimage

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"

	"github.com/kvgen/kvgen/internal/readfile"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Bounds on what kvgen reads of an image it did not make; SECURITY.md
// names each. An image within them is far larger than any real one.
const (
	// maxJSON bounds a manifest, index, config or index.json.
	maxJSON = 4 << 20
	// maxIndexEntries bounds the images a layout's or archive's
	// index.json lists, tags and SBOMs included.
	maxIndexEntries = 4096
	// maxManifests bounds the images of an image index.
	maxManifests = 256
	// maxPlatforms bounds the platforms' images inspect reads of an
	// index, each extracting its entrypoint to a temporary file in turn.
	maxPlatforms = 64
	// maxLayers bounds the layers of an image.
	maxLayers = 256
	// maxArchiveFiles bounds the files of a docker archive.
	maxArchiveFiles = 10000
	// maxOpens bounds the files one read of an image opens.
	maxOpens = 10000
	// maxRead bounds the blob bytes one read of an image reads: a base
	// image is copied whole into a layout.
	maxRead = 16 << 30
	// maxUnpacked bounds the layer bytes one read of an image
	// decompresses, looking for its entrypoint.
	maxUnpacked = 4 << 30
)

// budget is what one read of an image may still spend, across every
// blob it opens: a layout of many small files or an archive of gzip
// bombs ends with an error, not after hours.
type budget struct {
	opens, read, unpacked, sboms allowance
	// layers is what reading layers for an entrypoint's path found, so
	// that a layer listed many times, in one image or in many, is read
	// once for each path.
	layers layerMemo
	// sidecar is the SBOM beside a docker archive, read once.
	sidecar struct {
		once sync.Once
		data []byte
		err  error
	}
}

// allowance is what is left of a bound of limit units of what.
type allowance struct {
	left  atomic.Int64
	limit int64
	what  string
}

func (a *allowance) set(limit int64, what string) {
	a.left.Store(limit)
	a.limit, a.what = limit, what
}

// spend takes n from what is left; a negative n, which a descriptor may
// declare, is refused, not added.
func (a *allowance) spend(n int64) error {
	if n < 0 || a.left.Add(-n) < 0 {
		return fmt.Errorf("the image has more than %d %s to read", a.limit, a.what)
	}
	return nil
}

func newBudget() *budget {
	b := &budget{}
	b.opens.set(maxOpens, "files")
	b.read.set(maxRead, "bytes of blobs")
	b.unpacked.set(maxUnpacked, "bytes of decompressed layers")
	b.sboms.set(maxSBOMs, "bytes of SBOMs")
	return b
}

// spend is r, stopped by ctx and spending from a as it is read.
func spend(ctx context.Context, r io.Reader, a *allowance) io.Reader {
	return &spending{ctx: ctx, r: r, a: a}
}

type spending struct {
	ctx context.Context
	r   io.Reader
	a   *allowance
}

func (s *spending) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := s.r.Read(p)
	if serr := s.a.spend(int64(n)); serr != nil {
		return n, serr
	}
	return n, err
}

// localStore is an OCI layout, or the one in a docker archive, read as
// kvgen reads what it did not write: only regular files, opened without
// blocking, from inside the layout (a link cannot lead out); index.json
// and every blob bounded before anything is allocated; every blob checked
// against its descriptor's size and digest as it is read; and every read
// spending from one budget and stopped by the command's context. It reads
// nothing of the image graph until asked: opening it reads index.json
// alone.
type localStore struct {
	ref    Ref
	index  ocispec.Index
	files  map[string]tarFile // an archive's regular files
	budget *budget
}

// tarFile is where a file's bytes are in a tarball.
type tarFile struct{ offset, size int64 }

// openLocal opens the layout or archive ref names, reading its
// index.json; an archive's manifest.json, which docker load reads, must
// name the images its index.json does.
func openLocal(ctx context.Context, ref Ref, b *budget) (*localStore, error) {
	s := &localStore{ref: ref, budget: b}
	read := s.readLayout
	if ref.Kind == Archive {
		var err error
		if s.files, err = scanTar(ref.Path); err != nil {
			return nil, err
		}
		read = s.readSmall
	}
	data, err := read(ocispec.ImageLayoutFile)
	if err != nil {
		return nil, err
	}
	var layout ocispec.ImageLayout
	if err := json.Unmarshal(data, &layout); err != nil || layout.Version != ocispec.ImageLayoutVersion {
		return nil, fmt.Errorf("%s does not say %s, the version of OCI layout kvgen reads", ocispec.ImageLayoutFile, suggest.Quote(`{"imageLayoutVersion":"1.0.0"}`))
	}
	if data, err = read(ocispec.ImageIndexFile); err != nil {
		return nil, err
	}
	if err := decodeJSON(data, &s.index); err != nil {
		return nil, fmt.Errorf("%s: %w", ocispec.ImageIndexFile, err)
	}
	if n := len(s.index.Manifests); n > maxIndexEntries {
		return nil, fmt.Errorf("%s lists %d images, more than %d", ocispec.ImageIndexFile, n, maxIndexEntries)
	}
	if ref.Kind == Archive {
		if err := s.checkDockerManifest(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// readLayout reads a small file of a layout, bounded as a manifest is.
func (s *localStore) readLayout(name string) ([]byte, error) {
	root, err := os.OpenRoot(s.ref.Path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return readfile.ReadIn(root, name, maxJSON)
}

// readSmall reads a small file of an archive, bounded as a manifest is;
// nil and no error for none.
func (s *localStore) readSmall(name string) ([]byte, error) {
	tf, ok := s.files[name]
	if !ok {
		return nil, fmt.Errorf("%s has no %s", suggest.Show(s.ref.Path), name)
	}
	if tf.size > maxJSON {
		return nil, fmt.Errorf("%s in %s is %d bytes, more than %d", name, suggest.Show(s.ref.Path), tf.size, maxJSON)
	}
	f, err := readfile.Open(s.ref.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, tf.size)
	if _, err := f.ReadAt(data, tf.offset); err != nil {
		return nil, fmt.Errorf("%s in %s: %w", name, suggest.Show(s.ref.Path), err)
	}
	return data, nil
}

// scanTar lists the regular files of a tarball, and where their bytes
// are, reading its headers alone: the file is sought past each entry's
// bytes, never read. A file listed twice, or one a tar reader would not
// read as it is stored (a sparse one), is an error.
func scanTar(name string) (map[string]tarFile, error) {
	f, err := readfile.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	files := map[string]tarFile{}
	// Every name but a directory's counts once, whatever its type: a link
	// listed after a file of its name would be what an unpacking loader
	// reads there.
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", suggest.Show(name), err)
		}
		if n >= maxArchiveFiles {
			return nil, fmt.Errorf("%s holds more than %d files", suggest.Show(name), maxArchiveFiles)
		}
		p := cleanPath(h.Name)
		if h.Typeflag != tar.TypeDir {
			if names[p] {
				return nil, fmt.Errorf("%s holds %s twice", suggest.Show(name), suggest.Quote(p))
			}
			names[p] = true
		}
		if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink {
			// docker save links its legacy layer paths to blobs; a link
			// where a reader looks for an image's own files would have
			// docker load read another file than kvgen does.
			if imageFile(p) {
				return nil, fmt.Errorf("%s: %s is a link, where an image's own file belongs", suggest.Show(name), suggest.Quote(p))
			}
			continue
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		for k := range h.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") {
				return nil, fmt.Errorf("%s: %s is a sparse file, which no image has", suggest.Show(name), suggest.Quote(h.Name))
			}
		}
		// The reader stops at an entry's first byte.
		off, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, err
		}
		if h.Size > fi.Size()-off {
			return nil, fmt.Errorf("%s: %s is %d bytes, past the tarball's end", suggest.Show(name), suggest.Quote(h.Name), h.Size)
		}
		files[p] = tarFile{offset: off, size: h.Size}
	}
}

// imageFile reports whether the archive path p is one of an image's own
// files, which kvgen or docker load reads: the layout's and docker's
// indexes, and the blobs.
func imageFile(p string) bool {
	switch p {
	case ocispec.ImageLayoutFile, ocispec.ImageIndexFile, "manifest.json", "repositories":
		return true
	}
	return p == ocispec.ImageBlobsDir || strings.HasPrefix(p, ocispec.ImageBlobsDir+"/")
}

// checkDockerManifest checks that the images an archive's manifest.json
// lists, which docker load loads, are the ones its index.json leads to,
// which kvgen reads, and that index.json names no artifact, which
// containerd's image store would load under that name: an archive that
// says two things is refused, not reported as one image while it loads
// as another.
func (s *localStore) checkDockerManifest(ctx context.Context) error {
	entries, legacy, err := s.dockerManifest()
	if err != nil {
		return err
	}
	w := indexImages{ctx: ctx, s: s, seen: map[string]bool{}}
	for _, d := range s.index.Manifests {
		if err := w.add(d, 0); err != nil {
			return err
		}
	}
	if !legacy {
		return nil
	}
	var loaded []string
	for _, e := range entries {
		key := strings.Join(append([]string{e.Config}, e.Layers...), " ")
		if !slices.Contains(w.images, key) {
			return fmt.Errorf("manifest.json, which docker load reads, lists an image (config %s) that kvgen does not read from index.json: the archive holds two images under one name", suggest.Quote(e.Config))
		}
		loaded = append(loaded, key)
	}
	for _, r := range w.roots {
		if !slices.Contains(loaded, r) {
			return errors.New("index.json lists an image that manifest.json, which docker load reads, does not: the archive holds two images under one name")
		}
	}
	return nil
}

// dockerManifest reads the archive's manifest.json, which docker load
// reads, and reports whether it has one.
func (s *localStore) dockerManifest() ([]dockerManifestEntry, bool, error) {
	if _, ok := s.files["manifest.json"]; !ok {
		return nil, false, nil
	}
	data, err := s.readSmall("manifest.json")
	if err != nil {
		return nil, true, err
	}
	var entries []dockerManifestEntry
	if err := decodeJSON(data, &entries); err != nil {
		return nil, true, fmt.Errorf("manifest.json: %w", err)
	}
	if len(entries) > maxIndexEntries {
		return nil, true, fmt.Errorf("manifest.json lists %d images, more than %d", len(entries), maxIndexEntries)
	}
	return entries, true, nil
}

// indexImages gathers the images inspect reads from an index.json (as
// roots and Inspect pick them), each as manifest.json would name it.
type indexImages struct {
	ctx context.Context
	s   *localStore
	// images are all of them; roots, those that are images of their
	// own, not of an index.
	images, roots []string
	// seen holds the manifests read: one listed many times is read once.
	seen map[string]bool
}

// add gathers the images d leads to, listed at depth (0 for index.json's
// own entries).
func (w *indexImages) add(d ocispec.Descriptor, depth int) error {
	key := fmt.Sprint(d.Digest, depth)
	if depth == 0 && d.ArtifactType != "" {
		return namedArtifact(d)
	}
	if w.seen[key] || d.ArtifactType != "" || d.Platform != nil && d.Platform.OS == "unknown" {
		return nil
	}
	w.seen[key] = true
	switch d.MediaType {
	case ocispec.MediaTypeImageIndex, dockerList:
		if depth > 0 {
			return fmt.Errorf("index.json: %s is an index inside an index, which kvgen does not read", d.Digest)
		}
		index, err := fetchIndex(w.ctx, w.s, d)
		if err != nil {
			return err
		}
		for _, m := range index.Manifests {
			if err := w.add(m, depth+1); err != nil {
				return err
			}
		}
	case ocispec.MediaTypeImageManifest, dockerManifest:
		m, err := fetchManifest(w.ctx, w.s, d)
		if err != nil {
			return err
		}
		if depth == 0 && m.Subject != nil {
			return namedArtifact(d) // an artifact of an image, such as its SBOM
		}
		key := dockerKey(m)
		w.images = append(w.images, key)
		if depth == 0 {
			w.roots = append(w.roots, key)
		}
	}
	return nil
}

// namedArtifact refuses an artifact that index.json lists under a name:
// containerd's image store loads index.json, not manifest.json, and names
// each of its entries by annotation, so it would load the artifact under
// that name.
func namedArtifact(d ocispec.Descriptor) error {
	if name := d.Annotations["io.containerd.image.name"] + d.Annotations[ocispec.AnnotationRefName]; name != "" {
		return fmt.Errorf("index.json names %s (%s), which is no image kvgen reads, and which a container runtime would load under that name", d.Digest, suggest.Quote(name))
	}
	return nil
}

// dockerKey is an image as manifest.json names it: its config's and
// layers' paths in the archive.
func dockerKey(m ocispec.Manifest) string {
	key := []string{blobPath(m.Config)}
	for _, l := range m.Layers {
		key = append(key, blobPath(l))
	}
	return strings.Join(key, " ")
}

// blobPath is where a layout holds a blob; its digest must have been
// checked (checkDigest).
func blobPath(d ocispec.Descriptor) string {
	return ocispec.ImageBlobsDir + "/" + d.Digest.Algorithm().String() + "/" + d.Digest.Encoded()
}

// checkDigest checks that d's digest is one, whose text becomes a file's
// name (a hostile one could name any file), and that its size is not
// negative, which a budget would count as room.
func checkDigest(d ocispec.Descriptor) error {
	if err := d.Digest.Validate(); err != nil {
		return fmt.Errorf("a descriptor's digest %s: %w", suggest.Quote(string(d.Digest)), err)
	}
	if d.Size < 0 {
		return fmt.Errorf("a descriptor of %s has a size of %d bytes", d.Digest, d.Size)
	}
	return nil
}

// Fetch opens a blob, checked as it is read against d's size and digest:
// the reader's last Read is an error naming the blob if its bytes are not
// d's.
func (s *localStore) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	if err := checkDigest(d); err != nil {
		return nil, err
	}
	if err := s.budget.opens.spend(1); err != nil {
		return nil, err
	}
	name := blobPath(d)
	var f *os.File
	var r io.Reader
	var size int64
	if s.ref.Kind == Layout {
		root, err := os.OpenRoot(s.ref.Path)
		if err != nil {
			return nil, err
		}
		f, err = readfile.OpenIn(root, name)
		root.Close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("blob %s: %w", d.Digest, errdef.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("blob %s: %w", d.Digest, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		r, size = f, fi.Size()
	} else {
		tf, ok := s.files[name]
		if !ok {
			return nil, fmt.Errorf("blob %s: %w", d.Digest, errdef.ErrNotFound)
		}
		var err error
		if f, err = readfile.Open(s.ref.Path); err != nil {
			return nil, err
		}
		r, size = io.NewSectionReader(f, tf.offset, tf.size), tf.size
	}
	if size != d.Size {
		f.Close()
		return nil, fmt.Errorf("blob %s is %d bytes, not the %d its descriptor says", d.Digest, size, d.Size)
	}
	r = spend(ctx, r, &s.budget.read)
	return readCloser{verify(r, d), f}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Exists reports whether the layout or archive has the blob.
func (s *localStore) Exists(ctx context.Context, d ocispec.Descriptor) (bool, error) {
	if err := checkDigest(d); err != nil {
		return false, err
	}
	if s.ref.Kind == Archive {
		_, ok := s.files[blobPath(d)]
		return ok, nil
	}
	root, err := os.OpenRoot(s.ref.Path)
	if err != nil {
		return false, err
	}
	defer root.Close()
	fi, err := root.Lstat(blobPath(d))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil && fi.Mode().IsRegular(), err
}

// Resolve is the image index.json lists under a tag, or by digest.
func (s *localStore) Resolve(ctx context.Context, reference string) (ocispec.Descriptor, error) {
	var found []ocispec.Descriptor
	for _, d := range s.index.Manifests {
		if d.Annotations[ocispec.AnnotationRefName] == reference || d.Digest.String() == reference {
			found = append(found, d)
		}
	}
	switch len(found) {
	case 0:
		return ocispec.Descriptor{}, fmt.Errorf("no image is tagged %s: %w", suggest.Quote(reference), errdef.ErrNotFound)
	case 1:
		return found[0], nil
	}
	return ocispec.Descriptor{}, fmt.Errorf("%d images are tagged %s", len(found), suggest.Quote(reference))
}

// Predecessors are the manifests index.json lists whose subject is node:
// the SBOMs attached to it.
func (s *localStore) Predecessors(ctx context.Context, node ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	var list []ocispec.Descriptor
	read := map[digest.Digest]bool{} // a manifest listed many times is read once
	for _, d := range s.index.Manifests {
		if d.ArtifactType == "" || d.MediaType != ocispec.MediaTypeImageManifest || read[d.Digest] {
			continue
		}
		read[d.Digest] = true
		m, err := fetchManifest(ctx, s, d)
		if err != nil {
			return nil, err
		}
		if m.Subject != nil && m.Subject.Digest == node.Digest {
			list = append(list, d)
		}
	}
	return list, nil
}

// roots are the images of a layout or archive that are not artifacts
// such as an SBOM: those a reference without a tag may mean.
func (s *localStore) roots(ctx context.Context) ([]ocispec.Descriptor, error) {
	var roots []ocispec.Descriptor
	read := map[digest.Digest]bool{} // a manifest listed many times is read once
	for _, d := range s.index.Manifests {
		if d.ArtifactType != "" || read[d.Digest] {
			continue
		}
		read[d.Digest] = true
		if d.MediaType == ocispec.MediaTypeImageManifest {
			m, err := fetchManifest(ctx, s, d)
			if err != nil {
				return nil, err
			}
			if m.Subject != nil {
				continue
			}
		}
		roots = append(roots, d)
	}
	return roots, nil
}
