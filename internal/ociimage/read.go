package ociimage

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

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
			var err error
			if f.SBOM, err = attachedSBOM(ctx, src, ref, d, b); err != nil {
				f.Err = errors.Join(f.Err, fmt.Errorf("image %s: %w", where, err))
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
	*p = Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
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
func extract(ctx context.Context, src content.Fetcher, layers []ocispec.Descriptor, name string, w io.Writer, b *budget) (int64, error) {
	for _, l := range slices.Backward(layers) {
		n, err := fromLayer(ctx, src, l, name, w, b)
		if !errors.Is(err, errNotInLayers) {
			return n, err
		}
	}
	return 0, errNotInLayers
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

// fromLayer copies the file name out of the layer l. What it finds (the
// file, its whiteout, or neither) holds only once the layer's bytes are
// checked: whatever it finds, it reads the rest of the layer.
func fromLayer(ctx context.Context, src content.Fetcher, l ocispec.Descriptor, name string, w io.Writer, b *budget) (n int64, err error) {
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
	return findInLayer(tar.NewReader(r), name, w, l.Digest)
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
// errNotInLayers when it says nothing of name.
func findInLayer(tr *tar.Reader, name string, w io.Writer, layer digest.Digest) (int64, error) {
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

// attachedSBOM reads the SBOM attached to an image: its referrer of the
// SBOM's artifact type, or, for a docker archive, the file beside it.
func attachedSBOM(ctx context.Context, src source, ref Ref, d ocispec.Descriptor, b *budget) ([]byte, error) {
	if ref.Kind == Archive {
		data, err := readfile.ReadIfExists(ref.Path+".sbom.cdx.json", maxSBOM)
		if err == nil && data == nil {
			err = fmt.Errorf("no SBOM beside it (%s)", suggest.Show(ref.Path+".sbom.cdx.json"))
		}
		return data, err
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
