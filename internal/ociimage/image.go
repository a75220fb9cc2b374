package ociimage

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/errdef"

	"github.com/kvgen/kvgen/internal/inspect"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Platform is one image of an index: a Linux platform and its binary.
type Platform struct {
	OS, Architecture, Variant string
	// Binary is the binary's file.
	Binary string
}

// String is the platform as OCI names it: os/arch[/variant].
func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

func (p Platform) spec() *ocispec.Platform {
	return &ocispec.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}
}

// Options says how to package the binaries.
type Options struct {
	// Name is the binary's name in the image: /usr/local/bin/NAME, the
	// entrypoint. By default it is the last element of the main package's
	// import path, as go install names it.
	Name string
	// Platforms are the images, one per platform, in the order given; one
	// makes an image, several an image index.
	Platforms []Platform
	// Base is the image the binary is added to, a registry's reference or
	// an OCI layout; it must have every platform. Without it the image
	// holds the binary alone (and /tmp), which must be static.
	Base string
	// CABundle, when set, is put at /etc/ssl/certs/ca-certificates.crt.
	CABundle []byte
	// Labels are added to the image's config, after those Build sets.
	Labels map[string]string
	// Created is the images' creation time, fixed for reproducibility.
	Created time.Time
	// Tool is kvgen's version, which the SBOM names as its tool.
	Tool string
	// Remote says how to reach registries.
	Remote Remote
}

// Paths in every image.
const (
	BinDir     = "/usr/local/bin"
	CAFile     = "/etc/ssl/certs/ca-certificates.crt"
	WorkingDir = "/"
	// User is the non-root user and group the entrypoint runs as.
	User = "65532:65532"
)

// Labels this package sets in each image's config.
const (
	LabelCreated  = "org.opencontainers.image.created"
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	// LabelManifest is the hex SHA-256 of the deployment manifest the
	// binary's registry was generated from.
	LabelManifest = "com.github.kvgen.manifest.sha256"
)

// Image is what Build made: the content, ready to write.
type Image struct {
	store *memory.Store
	base  content.ReadOnlyStorage // the base image's blobs, or nil
	// Root is the image, or the index over several.
	Root ocispec.Descriptor
	// Platforms are each platform's image, in Options.Platforms' order.
	Platforms []PlatformImage
}

// PlatformImage is one platform's image and what it was made of.
type PlatformImage struct {
	Platform Platform
	Manifest ocispec.Descriptor
	// SBOM is the artifact manifest that carries the SBOM, whose subject
	// is Manifest; SBOMData is the SBOM itself.
	SBOM     ocispec.Descriptor
	SBOMData []byte
	Binary   *inspect.Binary
}

// CheckCABundle says what keeps data from being a CA bundle: it must hold
// PEM certificates, and no PEM block of another kind. A server.pem that
// holds a certificate and its private key, or any other file given by
// mistake, would be published in the image for anyone who pulls it.
func CheckCABundle(data []byte) error {
	certs := 0
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" && b.Type != "TRUSTED CERTIFICATE" {
			return fmt.Errorf("it holds a PEM block of type %s, and a CA bundle holds only certificates", suggest.Quote(b.Type))
		}
		certs++
	}
	if certs == 0 {
		return errors.New("it holds no PEM certificate")
	}
	return nil
}

// Build packages each platform's binary as an image, in memory.
func Build(ctx context.Context, opts Options) (*Image, error) {
	if len(opts.Platforms) == 0 {
		return nil, errors.New("ociimage: no platforms")
	}
	if opts.CABundle != nil {
		if err := CheckCABundle(opts.CABundle); err != nil {
			return nil, fmt.Errorf("the CA bundle: %w", err)
		}
	}
	img := &Image{store: memory.New()}
	var base *baseImage
	if opts.Base != "" {
		var err error
		if base, err = openBase(ctx, opts.Base, opts.Platforms, opts.Remote); err != nil {
			return nil, err
		}
		img.base = base.store
	}
	// Each platform's layer is compressed at once with the others'.
	img.Platforms = make([]PlatformImage, len(opts.Platforms))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range opts.Platforms {
		g.Go(func() error {
			pi, err := img.platform(ctx, opts, p, base)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			img.Platforms[i] = pi
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if len(img.Platforms) == 1 {
		img.Root = img.Platforms[0].Manifest
		return img, nil
	}
	index := ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
	}
	for _, pi := range img.Platforms {
		d := pi.Manifest
		d.Platform = pi.Platform.spec()
		index.Manifests = append(index.Manifests, d)
	}
	var err error
	img.Root, err = img.push(ctx, ocispec.MediaTypeImageIndex, index)
	return img, err
}

// platform makes one platform's image and its SBOM.
func (img *Image) platform(ctx context.Context, opts Options, p Platform, base *baseImage) (PlatformImage, error) {
	pi := PlatformImage{Platform: p}
	bin, err := platformBinary(ctx, p)
	if err != nil {
		return pi, err
	}
	pi.Binary = bin
	name := opts.Name
	if name == "" {
		name = commandName(bin)
	}
	entry := BinDir + "/" + name
	cfg := ocispec.Image{}
	var manifest ocispec.Manifest
	if base != nil {
		if cfg, manifest, err = base.platform(ctx, p); err != nil {
			return pi, err
		}
	} else {
		// No base to set a PATH.
		cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	}
	layer, diffID, err := img.pushLayer(ctx, opts, p, entry, base == nil)
	if err != nil {
		return pi, err
	}
	created := opts.Created.UTC()
	cfg = configure(cfg, opts, p, entry, created, diffID)
	cfg.Config.Labels = labels(cfg.Config.Labels, base, p, bin, created, opts.Labels)
	if pi.Manifest, err = img.pushManifest(ctx, manifest, cfg, layer); err != nil {
		return pi, err
	}
	if pi.SBOMData, err = SBOM(bin, opts.Tool); err != nil {
		return pi, err
	}
	pi.SBOM, err = img.pushSBOM(ctx, pi.SBOMData, pi.Manifest, created)
	return pi, err
}

// platformBinary reads p's binary, and refuses one built for another
// platform: the image would not run where its index says it does.
func platformBinary(ctx context.Context, p Platform) (*inspect.Binary, error) {
	bin, err := inspect.File(ctx, p.Binary)
	if err != nil {
		return nil, err
	}
	if bin.GOOS != "" && (bin.GOOS != p.OS || bin.GOARCH != p.Architecture) {
		return nil, fmt.Errorf("the binary %s is for %s/%s", suggest.Show(p.Binary), bin.GOOS, bin.GOARCH)
	}
	return bin, nil
}

// pushLayer makes and stores the one layer kvgen adds: the binary at
// entry, the CA bundle if there is one and, when bare (there is no base
// to give it), /tmp, which programs expect to write to. It returns the
// layer's descriptor and diff ID.
func (img *Image) pushLayer(ctx context.Context, opts Options, p Platform, entry string, bare bool) (ocispec.Descriptor, digest.Digest, error) {
	files := []file{{name: cleanPath(entry), mode: 0o755, src: p.Binary}}
	if opts.CABundle != nil {
		files = append(files, file{name: cleanPath(CAFile), mode: 0o644, data: opts.CABundle})
	}
	if bare {
		files = append(files, file{name: "tmp", dir: true, mode: 0o1777})
	}
	l, err := writeLayer(files, opts.Created)
	if err != nil {
		return ocispec.Descriptor{}, "", err
	}
	d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.FromBytes(l.blob), Size: int64(len(l.blob))}
	return d, l.diffID, img.pushBlob(ctx, d, l.blob)
}

// configure makes cfg, the base's config or a bare one, the config of
// p's image: its entrypoint, run as the non-root user, over the base's
// (what the base meant to run is no part of this image), and the layer
// diffID after the base's, with its history. The labels are labels'.
func configure(cfg ocispec.Image, opts Options, p Platform, entry string, created time.Time, diffID digest.Digest) ocispec.Image {
	cfg.Created = &created
	cfg.Platform = ocispec.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}
	cfg.Config.Entrypoint = []string{entry}
	cfg.Config.Cmd = nil
	cfg.Config.User = User
	cfg.Config.WorkingDir = WorkingDir
	if opts.CABundle != nil {
		cfg.Config.Env = setEnv(cfg.Config.Env, "SSL_CERT_FILE", CAFile)
	}
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = append(slices.Clip(cfg.RootFS.DiffIDs), diffID)
	cfg.History = append(slices.Clip(cfg.History), ocispec.History{Created: &created, CreatedBy: "kvgen build -image", Comment: entry})
	return cfg
}

// labels are the labels of p's image's config: the base's, but for
// those that describe an image (its version, source, creation...), which
// are the base's and not this image's; the base's name and digest; the
// binary's; then extra, the caller's, over all of them.
func labels(baseLabels map[string]string, base *baseImage, p Platform, bin *inspect.Binary, created time.Time, extra map[string]string) map[string]string {
	l := map[string]string{}
	for k, v := range baseLabels {
		if !strings.HasPrefix(k, "org.opencontainers.image.") {
			l[k] = v
		}
	}
	if base != nil {
		// A layout's path is the build machine's, which would make the
		// digest depend on where the build runs: only a registry's
		// reference names the base.
		if r, err := ParseRef(base.ref); err == nil && r.Kind == Registry {
			l[ocispec.AnnotationBaseImageName] = base.ref
		}
		d, _ := base.find(p)
		l[ocispec.AnnotationBaseImageDigest] = d.Digest.String()
	}
	maps.Copy(l, binaryLabels(bin, created))
	maps.Copy(l, extra)
	return l
}

// pushManifest stores cfg and the manifest of the image: m, the base's
// manifest or the zero one, with the layer added after the base's, and
// without what described the base alone (its annotations, its subject,
// its artifact type).
func (img *Image) pushManifest(ctx context.Context, m ocispec.Manifest, cfg ocispec.Image, layer ocispec.Descriptor) (ocispec.Descriptor, error) {
	cfgDesc, err := img.push(ctx, ocispec.MediaTypeImageConfig, cfg)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	m.Versioned = specs.Versioned{SchemaVersion: 2}
	m.MediaType = ocispec.MediaTypeImageManifest
	m.Config = cfgDesc
	m.Layers = append(slices.Clip(m.Layers), layer)
	m.Annotations = nil
	m.Subject = nil
	m.ArtifactType = "" // an image, whatever the base said it was
	return img.push(ctx, ocispec.MediaTypeImageManifest, m)
}

// binaryLabels are the labels that come from the binary: its source,
// revision and version, from its build information, and its manifest's
// checksum, from its registry.
func binaryLabels(bin *inspect.Binary, created time.Time) map[string]string {
	l := map[string]string{LabelCreated: created.Format(time.RFC3339)}
	if info := bin.Info; info != nil {
		if p := info.Main.Path; strings.Contains(strings.Split(p, "/")[0], ".") {
			l[LabelSource] = "https://" + p
		}
		if v := info.Main.Version; v != "" && v != "(devel)" {
			l[LabelVersion] = v
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				l[LabelRevision] = s.Value
			}
		}
	}
	if len(bin.Registries) > 0 {
		l[LabelManifest] = bin.Registries[0].ManifestSHA256
	}
	return l
}

// setEnv sets name to value in a list of NAME=VALUE.
func setEnv(env []string, name, value string) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(e string) bool { return strings.HasPrefix(e, name+"=") })
	return append(env, name+"="+value)
}

// SBOMArtifactType is the artifact type of the manifest that attaches an
// SBOM to its image, and the media type of the SBOM.
const SBOMArtifactType = "application/vnd.cyclonedx+json"

// pushSBOM stores an artifact manifest carrying sbom, whose subject is the
// image, as oras attach makes one.
func (img *Image) pushSBOM(ctx context.Context, sbom []byte, subject ocispec.Descriptor, created time.Time) (ocispec.Descriptor, error) {
	layer := ocispec.Descriptor{MediaType: SBOMArtifactType, Digest: digest.FromBytes(sbom), Size: int64(len(sbom)),
		Annotations: map[string]string{ocispec.AnnotationTitle: "sbom.cdx.json"}}
	if err := img.pushBlob(ctx, layer, sbom); err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := img.pushBlob(ctx, ocispec.DescriptorEmptyJSON, ocispec.DescriptorEmptyJSON.Data); err != nil {
		return ocispec.Descriptor{}, err
	}
	empty := ocispec.DescriptorEmptyJSON
	empty.Data = nil
	subject.Platform, subject.Annotations = nil, nil
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: SBOMArtifactType,
		Config:       empty,
		Layers:       []ocispec.Descriptor{layer},
		Subject:      &subject,
		Annotations:  map[string]string{ocispec.AnnotationCreated: created.Format(time.RFC3339)},
	}
	d, err := img.push(ctx, ocispec.MediaTypeImageManifest, m)
	d.ArtifactType = SBOMArtifactType
	d.Annotations = m.Annotations
	return d, err
}

// push stores v's JSON as a blob of mediaType.
func (img *Image) push(ctx context.Context, mediaType string, v any) (ocispec.Descriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	return d, img.pushBlob(ctx, d, data)
}

func (img *Image) pushBlob(ctx context.Context, d ocispec.Descriptor, data []byte) error {
	if ok, _ := img.store.Exists(ctx, d); ok {
		return nil
	}
	// Platforms are made at once, and share blobs (the SBOMs' empty
	// config): another may have pushed it since.
	if err := img.store.Push(ctx, d, bytes.NewReader(data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return err
	}
	return nil
}

// Fetch reads a blob of the image, from what Build made or the base.
func (img *Image) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	if ok, _ := img.store.Exists(ctx, d); ok || img.base == nil {
		return img.store.Fetch(ctx, d)
	}
	return img.base.Fetch(ctx, d)
}

// Exists says whether the image has the blob.
func (img *Image) Exists(ctx context.Context, d ocispec.Descriptor) (bool, error) {
	if ok, err := img.store.Exists(ctx, d); ok || err != nil || img.base == nil {
		return ok, err
	}
	return img.base.Exists(ctx, d)
}

// commandName is the name go install gives a binary: the last element of
// its main package's import path, but for a major version suffix.
func commandName(bin *inspect.Binary) string {
	p := ""
	if bin.Info != nil {
		p = bin.Info.Path
	}
	elems := strings.Split(p, "/")
	name := elems[len(elems)-1]
	if len(elems) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		name = elems[len(elems)-2]
	}
	if name == "" || name == "." || name == ".." {
		name = "app"
	}
	return name
}
