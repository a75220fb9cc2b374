package ociimage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/kvgen/kvgen/internal/suggest"
)

// Docker's media types, which base images from Docker's tools have.
const (
	dockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	dockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// baseImage is the image the binaries are added to.
type baseImage struct {
	ref   string
	store source
	// images are its platforms' manifests: one, or an index's.
	images []ocispec.Descriptor
}

// CheckBase checks, before anything is built, that the base image can be
// read and has every platform, each an image kvgen can build on.
func CheckBase(ctx context.Context, ref string, platforms []Platform, rm Remote) error {
	b, err := openBase(ctx, ref, platforms, rm)
	if err != nil {
		return err
	}
	// Each platform's manifest and config too, a few KiB: a base that
	// says two things is refused before anything is compiled.
	for _, p := range platforms {
		if _, _, err := b.platform(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// openBase opens the base image and checks it has every platform.
func openBase(ctx context.Context, ref string, platforms []Platform, rm Remote) (*baseImage, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, fmt.Errorf("-base: %w", err)
	}
	if r.Kind == Archive {
		return nil, fmt.Errorf("-base %s: a base image comes from a registry or an OCI layout (oci:DIR[:TAG])", suggest.Show(ref))
	}
	// A base is copied whole, each platform's image: the read budget is
	// the image budget's for each (a CUDA base runs 8 to 10 GB a
	// platform).
	budget := newBudget()
	budget.read.set(maxRead*int64(max(1, len(platforms))), "bytes of blobs")
	src, root, err := rm.open(ctx, r, budget)
	if err != nil {
		return nil, fmt.Errorf("base %w", err)
	}
	b := &baseImage{ref: ref, store: src}
	if _, local := src.(*localStore); !local {
		// A layout's reads spend from the budget already.
		b.store = budgeted{src, budget}
	}
	switch root.MediaType {
	case ocispec.MediaTypeImageIndex, dockerList:
		index, err := fetchIndex(ctx, src, root)
		if err != nil {
			return nil, fmt.Errorf("base image %s: %w", suggest.Show(ref), err)
		}
		b.images = index.Manifests
	case ocispec.MediaTypeImageManifest, dockerManifest:
		// A single image: its config says its platform.
		m, err := fetchManifest(ctx, src, root)
		if err != nil {
			return nil, fmt.Errorf("base image %s: %w", suggest.Show(ref), err)
		}
		var cfg ocispec.Image
		if err := fetchJSON(ctx, src, m.Config, &cfg); err != nil {
			return nil, fmt.Errorf("base image %s: %w", suggest.Show(ref), err)
		}
		root.Platform = &cfg.Platform
		b.images = []ocispec.Descriptor{root}
	default:
		return nil, fmt.Errorf("base image %s is a %s, not an image or an image index", suggest.Show(ref), suggest.Quote(root.MediaType))
	}
	for _, p := range platforms {
		if _, ok := b.find(p); !ok {
			return nil, fmt.Errorf("base image %s has no %s image (it has %s)", suggest.Show(ref), p, b.has())
		}
	}
	return b, nil
}

// find is the base's image for p.
func (b *baseImage) find(p Platform) (ocispec.Descriptor, bool) {
	for _, d := range b.images {
		q := d.Platform
		if q == nil || q.OS != p.OS || q.Architecture != p.Architecture {
			continue
		}
		if variant(p.Architecture, q.Variant) == variant(p.Architecture, p.Variant) {
			return d, true
		}
	}
	return ocispec.Descriptor{}, false
}

// variant is a platform's variant, with arm64's default v8 spelled out.
func variant(arch, v string) string {
	if arch == "arm64" && v == "" {
		return "v8"
	}
	return v
}

// has lists the base's platforms.
func (b *baseImage) has() string {
	var s []string
	for _, d := range b.images {
		if q := d.Platform; q != nil && q.OS != "unknown" {
			s = append(s, Platform{OS: q.OS, Architecture: q.Architecture, Variant: q.Variant}.String())
		}
	}
	if len(s) == 0 {
		return "no platform"
	}
	return strings.Join(s, ", ")
}

// platform is the base's config and manifest for p.
func (b *baseImage) platform(ctx context.Context, p Platform) (ocispec.Image, ocispec.Manifest, error) {
	var cfg ocispec.Image
	d, _ := b.find(p)
	m, err := fetchManifest(ctx, b.store, d)
	if err != nil {
		return cfg, m, fmt.Errorf("base image %s: %w", suggest.Show(b.ref), err)
	}
	if err := fetchJSON(ctx, b.store, m.Config, &cfg); err != nil {
		return cfg, m, fmt.Errorf("base image %s: %w", suggest.Show(b.ref), err)
	}
	// The image's config lists each layer's diffID, the base's first:
	// a base whose two counts differ makes an image no runtime unpacks.
	if n, l := len(cfg.RootFS.DiffIDs), len(m.Layers); n != l {
		return cfg, m, fmt.Errorf("base image %s, %s: its config lists %d layers, its manifest %d", suggest.Show(b.ref), p, n, l)
	}
	// kvgen adds a layer: an image of more than maxLayers is one inspect
	// refuses.
	if l := len(m.Layers); l >= maxLayers {
		return cfg, m, fmt.Errorf("base image %s, %s: it has %d layers, and an image kvgen makes at most %d with its own", suggest.Show(b.ref), p, l, maxLayers)
	}
	// A runtime picks the image by what the index says, and runs what
	// the config says: a base whose two disagree is refused, as inspect
	// refuses such an image.
	if q := d.Platform; q != nil && (cfg.OS != q.OS || cfg.Architecture != q.Architecture ||
		cfg.Variant != "" && q.Variant != "" && variant(q.Architecture, cfg.Variant) != variant(q.Architecture, q.Variant)) {
		return cfg, m, fmt.Errorf("base image %s: its index lists an image for %s, whose config says %s", suggest.Show(b.ref), p, suggest.Quote(Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}.String()))
	}
	// Of a base's layer, the image keeps what says which blob it is:
	// data embedded in the descriptor, or URLs to fetch it from
	// elsewhere, would be the base's say in what the image holds.
	for i, l := range m.Layers {
		m.Layers[i] = ocispec.Descriptor{MediaType: l.MediaType, Digest: l.Digest, Size: l.Size, Annotations: l.Annotations}
	}
	return cfg, m, nil
}

func fetchJSON(ctx context.Context, src content.Fetcher, d ocispec.Descriptor, v any) error {
	if d.Size > maxJSON {
		return fmt.Errorf("%s is %d bytes, more than the %d of a manifest or config", d.Digest, d.Size, maxJSON)
	}
	if err := checkDigest(d); err != nil {
		return err
	}
	data, err := content.FetchAll(ctx, src, d)
	switch {
	case errors.Is(err, content.ErrTrailingData):
		// oras' words name neither the blob nor what is wrong with it.
		return fmt.Errorf("%s holds more than the %d bytes its descriptor says", d.Digest, d.Size)
	case err != nil && !strings.Contains(err.Error(), d.Digest.String()):
		return fmt.Errorf("%s: %w", d.Digest, err)
	case err != nil:
		return err
	}
	if err := decodeJSON(data, v); err != nil {
		return fmt.Errorf("%s: %w", d.Digest, err)
	}
	return nil
}

// maxJSONTokens bounds the tokens of a manifest, index, config or
// index.json, brackets and keys included: decoded, a document of small
// values grows many times its size (4 MiB of "{}," became 534 MB of
// descriptors), so it is counted first. An index.json of the most images
// a layout may list takes about 70,000.
const maxJSONTokens = 1 << 18

// decodeJSON decodes data into v, once it has counted that data holds at
// most maxJSONTokens tokens.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	// Numbers stay text: one no float64 holds (1e400) is no reason to
	// stop counting.
	dec.UseNumber()
	for n := 0; ; n++ {
		if n > maxJSONTokens {
			return fmt.Errorf("it holds more than %d JSON values, more than any image's", maxJSONTokens)
		}
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err // not JSON: decoded, it would not be counted
		}
	}
	return json.Unmarshal(data, v)
}

// fetchManifest reads an image's manifest, of at most maxLayers layers.
func fetchManifest(ctx context.Context, src content.Fetcher, d ocispec.Descriptor) (ocispec.Manifest, error) {
	var m ocispec.Manifest
	switch d.MediaType {
	case ocispec.MediaTypeImageManifest, dockerManifest:
	case ocispec.MediaTypeImageIndex, dockerList:
		return m, fmt.Errorf("%s is an image index inside an index, which kvgen does not read", d.Digest)
	default:
		return m, fmt.Errorf("%s is a %s, not an image manifest", d.Digest, suggest.Quote(d.MediaType))
	}
	if err := fetchJSON(ctx, src, d, &m); err != nil {
		return m, err
	}
	if len(m.Layers) > maxLayers {
		return m, fmt.Errorf("%s has %d layers, more than %d", d.Digest, len(m.Layers), maxLayers)
	}
	for _, l := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if err := checkDigest(l); err != nil {
			return m, fmt.Errorf("%s: %w", d.Digest, err)
		}
		// A config or a layer that says it is a manifest or an index
		// would be read as one by whatever walks the image's graph
		// (copying it, say), past every bound on what an image holds.
		switch l.MediaType {
		case ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex, dockerManifest, dockerList, "application/vnd.oci.artifact.manifest.v1+json":
			return m, fmt.Errorf("%s: its config or a layer (%s) is a %s", d.Digest, l.Digest, suggest.Quote(l.MediaType))
		}
	}
	return m, nil
}

// fetchIndex reads an image index, of at most maxManifests images.
func fetchIndex(ctx context.Context, src content.Fetcher, d ocispec.Descriptor) (ocispec.Index, error) {
	var index ocispec.Index
	if err := fetchJSON(ctx, src, d, &index); err != nil {
		return index, err
	}
	if len(index.Manifests) > maxManifests {
		return index, fmt.Errorf("%s lists %d images, more than %d", d.Digest, len(index.Manifests), maxManifests)
	}
	for _, m := range index.Manifests {
		if err := checkDigest(m); err != nil {
			return index, fmt.Errorf("%s: %w", d.Digest, err)
		}
	}
	return index, nil
}
