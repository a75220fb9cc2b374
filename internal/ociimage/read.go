package ociimage

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/kvgen/kvgen/internal/inspect"
	"github.com/kvgen/kvgen/internal/readfile"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Found is what one platform's image of an image links.
type Found struct {
	Platform Platform
	// Manifest is the platform's image.
	Manifest ocispec.Descriptor
	// Binary is what its entrypoint links, as inspect reads a binary;
	// Err says why it is nil, or what is suspect about it.
	Binary *inspect.Binary
	Err    error
	// SBOM is the SBOM attached to the image, or nil for none.
	SBOM []byte
}

// maxSBOM bounds an SBOM read from an image, and maxSBOMs all the SBOMs
// one inspect of an image keeps, which it prints once every platform is
// read.
const (
	maxSBOM  = 64 << 20
	maxSBOMs = 4 * maxSBOM
)

// Inspect reads, for each platform of the image at ref, what its
// entrypoint links, taking the binary out of its layer into a temporary
// file; with sbom, it also reads the SBOM attached to each platform's
// image (beside the tarball, for a docker archive). A platform's own
// trouble is in its Found; the error is for the image's.
func Inspect(ctx context.Context, ref Ref, rm Remote, sbom bool) ([]Found, error) {
	b := newBudget()
	src, root, err := rm.open(ctx, ref, b)
	if err != nil {
		return nil, err
	}
	shown := suggest.Show(ref.String())
	var images []ocispec.Descriptor
	switch root.MediaType {
	case ocispec.MediaTypeImageIndex, dockerList:
		index, err := fetchIndex(ctx, src, root)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", shown, err)
		}
		for _, d := range index.Manifests {
			// Build attestations are listed as unknown/unknown.
			if d.Platform != nil && d.Platform.OS == "unknown" {
				continue
			}
			images = append(images, d)
		}
		if len(images) > maxPlatforms {
			return nil, fmt.Errorf("image %s has %d platforms' images, more than the %d inspect reads", shown, len(images), maxPlatforms)
		}
	case ocispec.MediaTypeImageManifest, dockerManifest:
		images = []ocispec.Descriptor{root}
	default:
		return nil, fmt.Errorf("image %s is a %s, not an image or an image index", shown, suggest.Quote(root.MediaType))
	}
	var found []Found
	// A manifest an index lists twice is one image, read once.
	for _, d := range onceEach(images) {
		f := Found{Manifest: d}
		f.Binary, f.Err = inspectImage(ctx, src, ref, d, &f.Platform, b)
		// A manifest that could not be read says no platform; its
		// error names it.
		where := shown
		if f.Platform.OS != "" {
			where += ", " + f.Platform.String()
		}
		if f.Err != nil {
			f.Err = fmt.Errorf("image %s: %w", where, f.Err)
		}
		if sbom && f.Binary != nil {
			data, err := attachedSBOM(ctx, src, ref, d, b)
			if err == nil {
				err = describes(data, f.Binary)
			}
			if err != nil {
				f.Err = errors.Join(f.Err, fmt.Errorf("image %s: %w", where, err))
			} else {
				f.SBOM = data
			}
		}
		found = append(found, f)
	}
	return found, nil
}

// inspectImage reads what one image's entrypoint links, and sets its
// platform from its config.
func inspectImage(ctx context.Context, src source, ref Ref, d ocispec.Descriptor, p *Platform, b *budget) (*inspect.Binary, error) {
	if q := d.Platform; q != nil {
		*p = Platform{OS: q.OS, Architecture: q.Architecture, Variant: q.Variant}
	}
	m, err := fetchManifest(ctx, src, d)
	if err != nil {
		return nil, err
	}
	var cfg ocispec.Image
	if err := fetchJSON(ctx, src, m.Config, &cfg); err != nil {
		return nil, err
	}
	listed := *p
	*p = Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
	// A runtime picks an image by what its index says; what it runs is
	// the config's. An image whose two disagree is refused, not shown
	// under either.
	if d.Platform != nil && (listed.OS != p.OS || listed.Architecture != p.Architecture ||
		listed.Variant != "" && p.Variant != "" && listed.Variant != p.Variant) {
		return nil, fmt.Errorf("its index lists it for %s, and its config says %s", suggest.Quote(listed.String()), suggest.Quote(p.String()))
	}
	if len(cfg.Config.Entrypoint) == 0 {
		return nil, errors.New("the image has no entrypoint to inspect")
	}
	entry := cfg.Config.Entrypoint[0]
	if !path.IsAbs(entry) {
		return nil, fmt.Errorf("the entrypoint %s is not an absolute path", suggest.Quote(entry))
	}
	tmp, err := os.CreateTemp("", "kvgen-inspect-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	size, err := extract(ctx, src, m.Layers, cleanPath(entry), tmp, b)
	if err != nil {
		return nil, fmt.Errorf("the entrypoint %s: %w", suggest.Quote(entry), err)
	}
	bin, err := inspect.Reader(ctx, entry, tmp, size)
	if bin != nil {
		bin.Image, bin.ImageDigest = ref.String(), d.Digest.String()
		bin.Platform = p.String()
	}
	return bin, err
}

// errNotInLayers says an image's layers do not have a file.
var errNotInLayers = errors.New("no layer of the image has it")

// extract copies the file name (a path without a leading slash) from the
// topmost layer that has it, unless a layer above deletes it.
//
// The layers below that one are read too: one that makes a directory on
// the file's path a symbolic link, which the layer above does not make a
// directory again, puts the file somewhere else when a container's layers
// are unpacked, and another file may be there.
func extract(ctx context.Context, src content.Fetcher, layers []ocispec.Descriptor, name string, w io.Writer, b *budget) (int64, error) {
	for i, l := range slices.Backward(layers) {
		if b.layers.absent(l, name) {
			continue
		}
		dirs := map[string]bool{} // directories on its path the layer makes
		n, err := readLayer(ctx, src, l, b, func(tr *tar.Reader) (int64, error) {
			return findInLayer(tr, name, w, l.Digest, dirs)
		})
		if errors.Is(err, errNotInLayers) {
			b.layers.setAbsent(l, name)
			continue
		}
		if err != nil {
			return n, err
		}
		for _, below := range slices.Backward(layers[:i]) {
			if allDirs(name, dirs) {
				break // nothing below can move it: kvgen's own layer makes every directory on its path
			}
			last, ok := b.layers.onPath(below, name)
			if !ok {
				if _, err := readLayer(ctx, src, below, b, func(tr *tar.Reader) (int64, error) {
					last, err = pathInLayer(tr, name)
					return 0, err
				}); err != nil {
					return 0, err
				}
				b.layers.setOnPath(below, name, last)
			}
			if err := checkPathInLayer(last, below.Digest, dirs); err != nil {
				return 0, err
			}
		}
		return n, nil
	}
	return 0, errNotInLayers
}

// layerMemo remembers, for one read of an image, what layers hold on a
// file's path, by layer digest and path: once a layer's bytes are
// checked, what they hold is known, and a layer listed many times, in one
// image or in many, is read once for each path.
type layerMemo struct {
	mu sync.Mutex
	// none are the layers that say nothing of the file; last, for a layer
	// below the file's, each directory on its path as its last entry
	// there leaves it (pathInLayer).
	none map[layerPath]bool
	last map[layerPath]map[string]byte
}

// layerPath is a layer, as its descriptor names it (a listing that says
// another size or media type is read again, and fails as it should), and
// a path in it.
type layerPath struct {
	digest    digest.Digest
	size      int64
	mediaType string
	name      string
}

func memoKey(l ocispec.Descriptor, name string) layerPath {
	return layerPath{l.Digest, l.Size, l.MediaType, name}
}

func (m *layerMemo) absent(layer ocispec.Descriptor, name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.none[memoKey(layer, name)]
}

func (m *layerMemo) setAbsent(layer ocispec.Descriptor, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.none == nil {
		m.none = map[layerPath]bool{}
	}
	m.none[memoKey(layer, name)] = true
}

func (m *layerMemo) onPath(layer ocispec.Descriptor, name string) (map[string]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.last[memoKey(layer, name)]
	return last, ok
}

func (m *layerMemo) setOnPath(layer ocispec.Descriptor, name string, last map[string]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[layerPath]map[string]byte{}
	}
	m.last[memoKey(layer, name)] = last
}

// errDeleted says a layer deletes a file (a whiteout).
var errDeleted = errors.New("a layer deletes it")

// fetchBlob opens a blob of any store, checked as it is read against its
// descriptor's size and digest, stopped by ctx and spending from b.
func fetchBlob(ctx context.Context, src content.Fetcher, d ocispec.Descriptor, b *budget) (io.ReadCloser, error) {
	switch s := src.(type) {
	case *localStore:
		if err := checkDigest(d); err != nil {
			return nil, err
		}
		return s.Fetch(ctx, d) // checked and spent there
	case budgeted:
		return s.Fetch(ctx, d) // spent from its own budget
	}
	return budgetedFetch(ctx, src, d, b)
}

// budgetedFetch opens a blob of src, checked as it is read against its
// descriptor's size and digest, stopped by ctx and spending from b.
func budgetedFetch(ctx context.Context, src content.Fetcher, d ocispec.Descriptor, b *budget) (io.ReadCloser, error) {
	if err := checkDigest(d); err != nil {
		return nil, err
	}
	if err := b.opens.spend(1); err != nil {
		return nil, err
	}
	rc, err := src.Fetch(ctx, d)
	if err != nil {
		return nil, err
	}
	r := spend(ctx, rc, &b.read)
	return readCloser{verify(r, d), rc}, nil
}

// budgeted is a registry's image whose blobs are read within a budget, as
// a layout's are: a base, whose every blob a build copies into a layout,
// reads at most maxRead bytes, not whatever its descriptors claim.
type budgeted struct {
	source
	b *budget
}

// Fetch is budgetedFetch from s's budget.
func (s budgeted) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	return budgetedFetch(ctx, s.source, d, s.b)
}

// readLayer reads the layer l's tar stream with scan. What scan finds
// holds only once the layer's bytes are checked: whatever it finds, the
// rest of the layer is read.
func readLayer(ctx context.Context, src content.Fetcher, l ocispec.Descriptor, b *budget, scan func(*tar.Reader) (int64, error)) (n int64, err error) {
	rc, err := fetchBlob(ctx, src, l, b)
	if err != nil {
		return 0, fmt.Errorf("layer %s: %w", l.Digest, err)
	}
	defer rc.Close()
	defer func() {
		if ctx.Err() != nil {
			return
		}
		if _, verr := io.Copy(io.Discard, rc); verr != nil {
			n, err = 0, fmt.Errorf("layer %s: %w", l.Digest, verr)
		}
	}()
	r, err := layerTar(ctx, rc, l.MediaType, b)
	if err != nil {
		return 0, err
	}
	return scan(tar.NewReader(r))
}

// layerTar returns a layer's tar stream: rc, or rc unzipped within the
// budget's unpacked bytes.
func layerTar(ctx context.Context, rc io.Reader, mediaType string, b *budget) (io.Reader, error) {
	// Non-distributable layers are deprecated for new images, but base
	// images made before may still have them: inspect reads them.
	switch mediaType {
	//lint:ignore SA1019 reading an older image's layer, not writing one
	case ocispec.MediaTypeImageLayerGzip, ocispec.MediaTypeImageLayerNonDistributableGzip, "application/vnd.docker.image.rootfs.diff.tar.gzip":
		zr, err := gzip.NewReader(rc)
		if err != nil {
			return nil, err
		}
		return spend(ctx, zr, &b.unpacked), nil
	//lint:ignore SA1019 reading an older image's layer, not writing one
	case ocispec.MediaTypeImageLayer, ocispec.MediaTypeImageLayerNonDistributable, "application/vnd.docker.image.rootfs.diff.tar":
		return rc, nil
	}
	return nil, fmt.Errorf("a layer of media type %s, which inspect does not read", suggest.Quote(mediaType))
}

// findInLayer copies the file name to w from a layer's tar stream, which
// it reads whole: an entry after the file's may replace it or a directory
// on its path, as a container's layers are applied. It returns
// errDeleted when the layer hides what the layers below have at name, and
// errNotInLayers when it says nothing of name. It adds to dirs the
// directories on name's path that the layer makes before the file.
func findInLayer(tr *tar.Reader, name string, w io.Writer, layer digest.Digest, dirs map[string]bool) (int64, error) {
	var copied int64
	found, hidden := false, false
	notDir := "" // a directory on its path that this layer makes something else
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		p := cleanPath(h.Name)
		dir, base := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		whitedOut := "" // what a whiteout entry deletes
		if target, ok := strings.CutPrefix(base, ".wh."); ok {
			whitedOut = path.Join(dir, target)
		}
		switch {
		case p == name:
			if found {
				return 0, fmt.Errorf("is in its layer (%s) twice", layer)
			}
			if copied, err = copyEntry(w, tr, h, layer); err != nil {
				return 0, err
			}
			found = true
		case whitedOut != "" && (whitedOut == name || within(name, whitedOut)),
			base == ".wh..wh..opq" && within(name, dir):
			// A whiteout of it or of a directory on its path, or an
			// opaque directory on its path: what layers below have there
			// is gone.
			hidden = true
		case within(name, p) && h.Typeflag == tar.TypeSymlink:
			return 0, fmt.Errorf("is reached through %s, a symbolic link in a layer (%s), which inspect does not follow", suggest.Quote("/"+p), layer)
		case within(name, p) && h.Typeflag != tar.TypeDir:
			hidden, notDir = true, p // a directory on its path is no directory here
		case within(name, p) && !found:
			dirs[p] = true
		}
	}
	switch {
	case found && notDir != "":
		// Unpacked, one of the two replaces the other: which depends
		// on the unpacker.
		return 0, fmt.Errorf("is in a layer (%s) that makes %s, on its path, no directory", layer, suggest.Quote("/"+notDir))
	case found:
		return copied, nil // this layer's own entries are above its whiteouts
	case hidden:
		return 0, errDeleted
	}
	return 0, errNotInLayers
}

// allDirs reports whether dirs holds every directory on name's path.
func allDirs(name string, dirs map[string]bool) bool {
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		if !dirs[d] {
			return false
		}
	}
	return true
}

// pathInLayer reads a layer below the one that has the file name: each
// directory on its path that the layer has, and the type of its last
// entry there, which is what unpacking the layer leaves.
func pathInLayer(tr *tar.Reader, name string) (map[string]byte, error) {
	last := map[string]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return last, nil
		}
		if err != nil {
			return nil, err
		}
		if p := cleanPath(h.Name); within(name, p) {
			last[p] = h.Typeflag
		}
	}
}

// checkPathInLayer checks a layer below the one that has the file: each
// directory on its path that the layers above do not make (dirs) must not
// be something else here, as its last entry in the layer (last, from
// pathInLayer) leaves it. The directories this layer makes are added to
// dirs, for the layers below.
func checkPathInLayer(last map[string]byte, layer digest.Digest, dirs map[string]bool) error {
	for _, p := range slices.Sorted(maps.Keys(last)) {
		if dirs[p] {
			continue
		}
		switch last[p] {
		case tar.TypeDir:
			dirs[p] = true
		case tar.TypeSymlink:
			return fmt.Errorf("is reached through %s, a symbolic link in a layer below it (%s), which inspect does not follow", suggest.Quote("/"+p), layer)
		default:
			return fmt.Errorf("is in a layer above one (%s) that makes %s, on its path, no directory", layer, suggest.Quote("/"+p))
		}
	}
	return nil
}

// copyEntry copies the file of tar entry h to w, if it is one inspect
// reads: a regular file, not sparse, of at most inspect.MaxSize bytes.
func copyEntry(w io.Writer, tr *tar.Reader, h *tar.Header, layer digest.Digest) (int64, error) {
	if h.Typeflag != tar.TypeReg {
		return 0, fmt.Errorf("is not a regular file in its layer (%s)", layer)
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return 0, fmt.Errorf("is a sparse file in its layer (%s), which no image has", layer)
		}
	}
	if h.Size > inspect.MaxSize {
		return 0, fmt.Errorf("is %d bytes, larger than the %d bytes inspect reads", h.Size, int64(inspect.MaxSize))
	}
	return io.Copy(w, io.LimitReader(tr, h.Size))
}

// within reports whether the path name is inside dir, which is then a
// directory on its path; both are clean and without a leading slash, ""
// for the root.
func within(name, dir string) bool {
	return dir != name && (dir == "" || strings.HasPrefix(name, dir+"/"))
}

// sidecarSBOM reads the SBOM beside a docker archive, once for all its
// platforms, from the archive's directory: a link there may lead
// elsewhere in it, never out of it (to a file of credentials, say).
func sidecarSBOM(ref Ref, b *budget) ([]byte, error) {
	b.sidecar.once.Do(func() {
		name := ref.Path + ".sbom.cdx.json"
		b.sidecar.data, b.sidecar.err = readSidecar(name)
		if b.sidecar.err == nil {
			b.sidecar.err = b.sboms.spend(int64(len(b.sidecar.data)))
		}
	})
	return b.sidecar.data, b.sidecar.err
}

// readSidecar reads the regular file at name inside its directory.
func readSidecar(name string) ([]byte, error) {
	root, err := os.OpenRoot(filepath.Dir(name))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	data, err := readfile.ReadIn(root, filepath.Base(name), maxSBOM)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no SBOM beside it (%s)", suggest.Show(name))
	case err != nil:
		return nil, fmt.Errorf("the SBOM beside it: %w", err)
	}
	return data, nil
}

// attachedSBOM reads the SBOM attached to an image: its referrer of the
// SBOM's artifact type, or, for a docker archive, the file beside it.
func attachedSBOM(ctx context.Context, src source, ref Ref, d ocispec.Descriptor, b *budget) ([]byte, error) {
	if ref.Kind == Archive {
		return sidecarSBOM(ref, b)
	}
	refs, err := sbomReferrers(ctx, src, d)
	if err != nil {
		return nil, fmt.Errorf("finding its SBOM: %w", err)
	}
	switch len(refs) {
	case 0:
		return nil, errors.New("no SBOM is attached to it")
	case 1:
	default:
		// Which describes the binary, kvgen cannot tell: it names them
		// rather than print one.
		var digests []string
		for _, r := range refs {
			digests = append(digests, r.Digest.String())
		}
		slices.Sort(digests)
		return nil, fmt.Errorf("%d SBOMs are attached to it (%s), and kvgen cannot tell which describes it", len(refs), strings.Join(digests, ", "))
	}
	m, err := fetchManifest(ctx, src, refs[0])
	if err != nil {
		return nil, err
	}
	for _, l := range m.Layers {
		if l.MediaType != SBOMArtifactType {
			continue
		}
		if l.Size > maxSBOM {
			return nil, fmt.Errorf("its SBOM is %d bytes, more than %d", l.Size, maxSBOM)
		}
		if err := b.sboms.spend(l.Size); err != nil {
			return nil, err
		}
		rc, err := fetchBlob(ctx, src, l, b)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc) // checked against the descriptor as it is read
	}
	return nil, errors.New("its SBOM's manifest holds no SBOM")
}
