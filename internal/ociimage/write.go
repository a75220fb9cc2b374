package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"net"
	"net/http"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/rogpeppe/go-internal/lockedfile"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/kvgen/kvgen/internal/atomicfile"
	"github.com/kvgen/kvgen/internal/readfile"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Write puts the image where ref says, with each platform's SBOM attached:
// in a registry, as referrers of the platform's image; in a layout, as
// manifests its index.json lists, whose subject is the platform's image;
// beside a docker archive, as FILE.sbom.cdx.json. A registry is pushed
// every blob and manifest before the tag, so a push that fails leaves no
// tag on a partial image.
func Write(ctx context.Context, img *Image, ref Ref, rm Remote) error {
	var err error
	switch ref.Kind {
	case Registry:
		err = img.pushRemote(ctx, ref, rm)
	case Layout:
		err = img.writeLayout(ctx, ref)
	case Archive:
		err = img.writeArchive(ctx, ref)
	}
	if err != nil {
		return fmt.Errorf("image %s: %w", suggest.Show(ref.String()), err)
	}
	return nil
}

// pushRemote copies the image to a registry, then the SBOMs, then tags it.
func (img *Image) pushRemote(ctx context.Context, ref Ref, rm Remote) error {
	repo, err := rm.repository(ref)
	if err != nil {
		return err
	}
	return img.pushTo(ctx, repo, ref)
}

// explain says what a registry's refusal or a network failure means,
// before what the client says of it.
func explain(err error, host string) error {
	if err == nil {
		return nil
	}
	var resp *errcode.ErrorResponse
	var op *net.OpError
	switch {
	case errors.Is(err, http.ErrSchemeMismatch) && IsLoopback(host):
		return fmt.Errorf("the registry %s answers plain HTTP, not HTTPS; it is on this machine's loopback, so add -insecure to reach it over plain HTTP: %w", host, err)
	case errors.Is(err, http.ErrSchemeMismatch):
		return fmt.Errorf("the registry %s answers plain HTTP, not HTTPS; serve it over HTTPS: -insecure is refused for a registry off this machine's loopback, because anyone on the network between could read and change the image: %w", host, err)
	case errors.As(err, &resp) && resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("the registry %s refused the credentials (Docker's config has them, as docker login %s writes them): %w", host, host, err)
	case errors.As(err, &resp) && resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("the registry %s denied access: %w", host, err)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("cannot reach the registry %s: %w", host, err)
	case op != nil || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed):
		return fmt.Errorf("the connection to the registry %s broke: %w", host, err)
	}
	return err
}

// pushTo pushes the image's blobs and manifests, then the SBOMs, then the
// tag.
func (img *Image) pushTo(ctx context.Context, repo *remote.Repository, ref Ref) error {
	host := ref.Remote.Registry
	opts := oras.DefaultCopyGraphOptions
	opts.Concurrency = 3
	opts.FindSuccessors = successors
	for _, pi := range img.Platforms {
		if err := oras.CopyGraph(ctx, img, repo, pi.Manifest, opts); err != nil {
			return fmt.Errorf("%s: pushing the image: %w", pi.Platform, explain(err, host))
		}
	}
	if err := oras.CopyGraph(ctx, img, repo, img.Root, opts); err != nil {
		return fmt.Errorf("pushing the index: %w", explain(err, host))
	}
	for _, pi := range img.Platforms {
		if err := oras.CopyGraph(ctx, img, repo, pi.SBOM, opts); err != nil {
			return fmt.Errorf("%s: attaching the SBOM: %w", pi.Platform, explain(err, host))
		}
	}
	if _, err := ref.Remote.Digest(); err == nil {
		if ref.Remote.Reference != img.Root.Digest.String() {
			return fmt.Errorf("the image's digest is %s, not the one named", img.Root.Digest)
		}
		return nil
	}
	if err := repo.Tag(ctx, img.Root, ref.Remote.Reference); err != nil {
		return fmt.Errorf("tagging %s: %w", suggest.Quote(ref.Remote.Reference), explain(err, host))
	}
	return nil
}

// successors is content.Successors, which reads a manifest or an index
// whole, for descriptors a base image may have written: one that claims
// more than a manifest may hold is refused before anything is read.
func successors(ctx context.Context, f content.Fetcher, d ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	switch d.MediaType {
	case ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex, dockerManifest, dockerList, "application/vnd.oci.artifact.manifest.v1+json":
		if d.Size > maxJSON {
			return nil, fmt.Errorf("%s is %d bytes, more than the %d of a manifest or index", d.Digest, d.Size, maxJSON)
		}
	}
	return content.Successors(ctx, f, d)
}

// blobs lists every blob of the image and its SBOMs, each once, sorted
// by digest.
func (img *Image) blobs(ctx context.Context) ([]ocispec.Descriptor, error) {
	seen := map[string]ocispec.Descriptor{}
	var walk func(d ocispec.Descriptor) error
	walk = func(d ocispec.Descriptor) error {
		if _, ok := seen[d.Digest.String()]; ok {
			return nil
		}
		// A base's descriptors are outside input, and a digest becomes
		// a file's name.
		if err := checkDigest(d); err != nil {
			return err
		}
		seen[d.Digest.String()] = ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}
		succ, err := successors(ctx, img, d)
		if err != nil {
			return err
		}
		for _, s := range succ {
			if err := walk(s); err != nil {
				return err
			}
		}
		return nil
	}
	roots := []ocispec.Descriptor{img.Root}
	for _, pi := range img.Platforms {
		roots = append(roots, pi.SBOM)
	}
	for _, r := range roots {
		if err := walk(r); err != nil {
			return nil, err
		}
	}
	list := make([]ocispec.Descriptor, 0, len(seen))
	for _, d := range seen {
		list = append(list, d)
	}
	slices.SortFunc(list, func(a, b ocispec.Descriptor) int { return strings.Compare(a.Digest.String(), b.Digest.String()) })
	return list, nil
}

// indexEntries are what index.json lists for the image: the root, tagged
// tag if there is one, then each SBOM.
func (img *Image) indexEntries(tag string) []ocispec.Descriptor {
	root := img.Root
	root.Platform = nil
	if tag != "" {
		root.Annotations = map[string]string{ocispec.AnnotationRefName: tag}
	}
	list := []ocispec.Descriptor{root}
	for _, pi := range img.Platforms {
		list = append(list, pi.SBOM)
	}
	return list
}

// writeLayout adds the image to the OCI layout at ref.Path, creating it if
// need be: its blobs, then index.json, written whole and renamed into
// place, where the image replaces one of the same tag, and its SBOMs any
// with the same subject. What the layout holds may have been planted: no
// file in it is written through (a link is replaced, not followed), a blob
// already there is kept only if its bytes are the blob's, and index.json is
// read as a bounded regular file. A directory that holds files but no
// oci-layout is no layout, and is left as it is.
//
// Two writes to one layout take turns, holding a lock on its oci-layout
// file, which is never renamed: each reads index.json after the other
// wrote it, and neither removes the other's temporary files.
func (img *Image) writeLayout(ctx context.Context, ref Ref) error {
	for range 3 {
		err := img.writeLayoutOnce(ctx, ref)
		if !errors.Is(err, errLayoutGone) {
			return err
		}
	}
	return fmt.Errorf("%s: %w", suggest.Show(ref.Path), errLayoutGone)
}

// errLayoutGone says a layout, or its oci-layout file, went while a write
// waited for its lock: another write that made the layout failed, and
// removed it, or the file was replaced.
var errLayoutGone = errors.New("the layout was removed or replaced while this build waited to write it")

// writeLayoutOnce is writeLayout, once.
func (img *Image) writeLayoutOnce(ctx context.Context, ref Ref) (err error) {
	dir := ref.Path
	_, serr := os.Lstat(dir)
	made := errors.Is(serr, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Every file of the layout is written and read inside root: a
	// directory in it planted as a link that leads out is never followed.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	lock, err := lockLayout(ctx, root, dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	if made {
		// A layout this write made goes again if the write fails,
		// unless another write finished in it first.
		if _, ierr := root.Lstat(ocispec.ImageIndexFile); errors.Is(ierr, fs.ErrNotExist) {
			defer func() {
				if err != nil {
					os.RemoveAll(dir)
				}
			}()
		}
	}
	if err := img.writeBlobs(ctx, root); err != nil {
		return err
	}
	data, err := img.updatedIndex(ctx, root, dir, ref.Tag)
	if err != nil {
		return err
	}
	return atomicfile.ReplaceIn(root, ocispec.ImageIndexFile, bytes.NewReader(data))
}

// writeBlobs copies into the layout every blob of the image it lacks,
// after removing what a write killed before its rename left there.
func (img *Image) writeBlobs(ctx context.Context, root *os.Root) error {
	blobs, err := img.blobs(ctx)
	if err != nil {
		return err
	}
	// What a write killed before its rename left in the layout goes: its
	// blobs' and its index.json's (another write may be making oci-layout
	// right now, without the lock, which it is about to take).
	if err := atomicfile.RemoveStaleTempsIn(root, ".", ocispec.ImageIndexFile); err != nil {
		return err
	}
	var dirs []string
	for _, d := range blobs {
		dirs = append(dirs, path.Dir(blobPath(d)))
	}
	slices.Sort(dirs)
	for _, dir := range slices.Compact(dirs) {
		if err := atomicfile.RemoveStaleTempsIn(root, dir, ""); err != nil {
			return err
		}
	}
	for _, d := range blobs {
		if hasBlob(root, blobPath(d), d) {
			continue
		}
		if err := img.copyBlobTo(ctx, d, root); err != nil {
			return err
		}
	}
	return nil
}

// updatedIndex returns the layout's index.json with the image in it: what
// tag named before, this image untagged and its SBOMs replaced, and what
// no image in the layout refers to any more pruned.
func (img *Image) updatedIndex(ctx context.Context, root *os.Root, dir, tag string) ([]byte, error) {
	shown := suggest.Show(filepath.Join(dir, ocispec.ImageIndexFile))
	index := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	data, err := readfile.ReadIn(root, ocispec.ImageIndexFile, maxJSON)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("the layout's index: %w", err)
	default:
		if err := decodeJSON(data, &index); err != nil {
			return nil, fmt.Errorf("%s: %w", shown, err)
		}
	}
	if n := len(index.Manifests); n > maxIndexEntries {
		return nil, fmt.Errorf("%s lists %d images, more than %d", shown, n, maxIndexEntries)
	}
	var kept []ocispec.Descriptor
	for _, d := range index.Manifests {
		switch {
		case tag != "" && d.Annotations[ocispec.AnnotationRefName] == tag:
			continue // what the tag named, which this image replaces
		case d.Digest == img.Root.Digest && d.Annotations[ocispec.AnnotationRefName] == "":
			continue // this image, untagged: listed again below
		case d.ArtifactType == SBOMArtifactType && img.hasSBOM(d):
			continue
		}
		kept = append(kept, d)
	}
	index.Manifests = append(prune(ctx, root, kept, img), img.indexEntries(tag)...)
	return json.Marshal(index)
}

// lockLayout returns the layout's oci-layout file locked for writing, as
// the go command locks go.mod, once it is a regular file that says the
// layout's version. A directory that holds anything but no oci-layout is
// refused: it is not a layout, and its index.json, if it has one, is
// someone else's. The file is made whole where there is none, never
// replacing another's, so every write locks the same file; one that says
// something else, or a link in its place, is replaced (not followed) and
// errLayoutGone asks for another try.
func lockLayout(ctx context.Context, root *os.Root, dir string) (*lockedfile.File, error) {
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	name := ocispec.ImageLayoutFile
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := emptyOrGone(root, dir); err != nil {
			return nil, err
		}
		if err := atomicfile.CreateIn(root, name, bytes.NewReader(layout)); err != nil {
			return nil, gone(err)
		}
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		if err := atomicfile.ReplaceIn(root, name, bytes.NewReader(layout)); err != nil {
			return nil, err
		}
	}
	l, err := atomicfile.OpenLocked(ctx, filepath.Join(dir, name))
	if errors.Is(err, fs.ErrPermission) {
		// A read-only oci-layout (another tool's, copied) cannot be
		// locked for writing: one of kvgen's, of the same bytes, can.
		if rerr := atomicfile.ReplaceIn(root, name, bytes.NewReader(layout)); rerr != nil {
			return nil, err
		}
		return nil, errLayoutGone
	}
	if err != nil {
		return nil, gone(err)
	}
	// The file locked must be the regular file in the layout, not one
	// that was put in its place since, or that a link there leads to.
	held, herr := l.Stat()
	now, nerr := root.Lstat(name)
	switch {
	case herr != nil:
		err = herr
	case errors.Is(nerr, fs.ErrNotExist):
		err = errLayoutGone
	case nerr != nil:
		err = nerr
	case !now.Mode().IsRegular() || !os.SameFile(held, now):
		err = errLayoutGone
	default:
		data, rerr := io.ReadAll(io.LimitReader(l, int64(len(layout))+1))
		switch {
		case rerr != nil:
			err = rerr
		case !bytes.Equal(data, layout):
			err = atomicfile.ReplaceIn(root, name, bytes.NewReader(layout))
			if err == nil {
				err = errLayoutGone
			}
		}
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// gone is err, or errLayoutGone if it says a file is not there: another
// write that made the layout removed it meanwhile.
func gone(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errLayoutGone
	}
	return err
}

// emptyOrGone checks that the directory dir, which has no oci-layout, is
// empty but for temporary files of writes (a layout to make, another
// write's oci-layout on its way), or that it is gone.
func emptyOrGone(root *os.Root, dir string) error {
	var found string
	err := atomicfile.EachIn(root, ".", func(e fs.DirEntry) error {
		if !atomicfile.IsTemp(e) {
			found = e.Name()
			return fs.SkipAll
		}
		return nil
	})
	if err != nil && err != fs.SkipAll {
		return err
	}
	if found != "" {
		// Another write may have made the layout since: its oci-layout
		// comes before anything else it writes.
		if _, err := root.Lstat(ocispec.ImageLayoutFile); err == nil {
			return nil
		}
		return fmt.Errorf("%s holds %s and no %s: it is no OCI layout, and kvgen writes one only in a new or empty directory or a layout", suggest.Show(dir), suggest.Quote(found), ocispec.ImageLayoutFile)
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return errLayoutGone
	}
	return nil
}

// hasBlob reports whether the file name in root is a regular file, not a
// link, that holds the blob d: its size and digest.
func hasBlob(root *os.Root, name string, d ocispec.Descriptor) bool {
	if fi, err := root.Lstat(name); err != nil || !fi.Mode().IsRegular() || fi.Size() != d.Size {
		return false
	}
	f, err := readfile.OpenIn(root, name)
	if err != nil {
		return false
	}
	defer f.Close()
	vr := content.NewVerifyReader(f, d)
	if _, err := io.Copy(io.Discard, vr); err != nil {
		return false
	}
	return vr.Verify() == nil
}

// maxPruneRead bounds what prune reads of a layout's blobs.
const maxPruneRead = 64 << 20

// prune drops from a layout's index.json entries the SBOMs whose subject
// is no longer there: neither an image it lists, nor one of an index it
// lists, nor one of img's. Their blobs stay, as they do when a tag moves.
func prune(ctx context.Context, root *os.Root, entries []ocispec.Descriptor, img *Image) []ocispec.Descriptor {
	// Each blob is read once, however many entries name it, one at a
	// time, and not at all once the command is stopped; what is kept of
	// it is a digest or two. Past maxPruneRead bytes, or an index of more
	// than maxManifests images, nothing is dropped: what kvgen could not
	// read, it keeps.
	read := int64(0)
	blob := func(d ocispec.Descriptor, v any) bool {
		if checkDigest(d) != nil || ctx.Err() != nil || d.Size > maxJSON || read > maxPruneRead {
			return false
		}
		data, err := readfile.ReadIn(root, blobPath(d), maxJSON)
		read += int64(len(data)) // what was read, whatever the descriptor says
		return err == nil && int64(len(data)) == d.Size && decodeJSON(data, v) == nil
	}
	live := map[string]bool{}
	for _, pi := range img.Platforms {
		live[pi.Manifest.Digest.String()] = true
	}
	expanded := map[digest.Digest]bool{}
	for _, d := range entries {
		if d.ArtifactType != "" {
			continue
		}
		live[d.Digest.String()] = true
		if (d.MediaType == ocispec.MediaTypeImageIndex || d.MediaType == dockerList) && !expanded[d.Digest] {
			expanded[d.Digest] = true
			var index ocispec.Index
			if !blob(d, &index) || len(index.Manifests) > maxManifests {
				return entries
			}
			for _, m := range index.Manifests {
				live[m.Digest.String()] = true
			}
		}
	}
	subjects := map[digest.Digest]string{} // an SBOM's subject, "" if none is read
	var kept []ocispec.Descriptor
	for _, d := range entries {
		if d.ArtifactType == SBOMArtifactType {
			subject, ok := subjects[d.Digest]
			if !ok {
				var m ocispec.Manifest
				if !blob(d, &m) && read > maxPruneRead {
					return entries
				}
				if m.Subject != nil {
					subject = m.Subject.Digest.String()
				}
				subjects[d.Digest] = subject
			}
			if subject != "" && !live[subject] {
				continue
			}
		}
		kept = append(kept, d)
	}
	return kept
}

func (img *Image) hasSBOM(d ocispec.Descriptor) bool {
	for _, pi := range img.Platforms {
		if pi.SBOM.Digest == d.Digest {
			return true
		}
	}
	return false
}

// copyBlobTo writes a blob to a file, through a temporary file renamed
// into place once its content is checked.
func (img *Image) copyBlobTo(ctx context.Context, d ocispec.Descriptor, root *os.Root) error {
	r, err := img.Fetch(ctx, d)
	if err != nil {
		return err
	}
	defer r.Close()
	// The blob is checked as it is copied: a wrong one never replaces
	// the file.
	return atomicfile.ReplaceIn(root, blobPath(d), verify(r, d))
}

// verified reads a blob and, at its end, checks what it read against its
// descriptor's size and digest: VerifyReader's Read alone checks neither.
// Its error names the blob, which oras's copy does not.
type verified struct {
	vr *content.VerifyReader
	d  digest.Digest
}

// verify returns r, the bytes of the blob d, checked as verified checks.
func verify(r io.Reader, d ocispec.Descriptor) verified {
	return verified{content.NewVerifyReader(r, d), d.Digest}
}

func (v verified) Read(p []byte) (int, error) {
	n, err := v.vr.Read(p)
	if err == io.EOF {
		if verr := v.vr.Verify(); verr != nil {
			return n, fmt.Errorf("blob %s: %w", v.d, verr)
		}
	}
	return n, err
}

// dockerManifestEntry is an image of a docker archive's manifest.json.
type dockerManifestEntry struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// writeArchive writes the image as docker save does: an OCI layout in a
// tarball, with the manifest.json docker load reads. It holds one
// platform's image; the SBOM goes beside it.
func (img *Image) writeArchive(ctx context.Context, ref Ref) error {
	if len(img.Platforms) != 1 {
		return fmt.Errorf("a docker archive holds one platform's image, and there are %d; give one -target, or write an OCI layout (oci:DIR) or to a registry", len(img.Platforms))
	}
	pi := img.Platforms[0]
	// Nothing is written when the archive cannot be.
	if fi, err := os.Lstat(ref.Path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory; name the archive's file", suggest.Show(ref.Path))
	}
	sbom := ref.Path + ".sbom.cdx.json"
	if err := replaceableSBOM(sbom); err != nil {
		return err
	}
	m, err := fetchManifest(ctx, img, pi.Manifest)
	if err != nil {
		return err
	}
	// Named as atomicfile names its temporary files, so that a write
	// killed before its rename leaves nothing the next one keeps.
	if err := atomicfile.RemoveStaleTemps(ref.Path); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(ref.Path), "."+filepath.Base(ref.Path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = img.writeTar(ctx, tmp, archiveBlobs(pi, m), archiveFiles(img.Root, m, ref.Tag))
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The archive's rename is the build's one change until it succeeds;
	// then its SBOM. If that fails, no SBOM beside the archive is better
	// than the one of the archive it replaced.
	if err := os.Rename(tmp.Name(), ref.Path); err != nil {
		return err
	}
	if err := atomicfile.Replace(sbom, bytes.NewReader(pi.SBOMData)); err != nil {
		os.Remove(sbom)
		return err
	}
	return nil
}

// replaceableSBOM checks that what is at the path of an archive's SBOM,
// a name the user did not give, may be replaced: nothing, a link (which
// is replaced, not followed), or an SBOM, as an earlier build wrote.
func replaceableSBOM(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	if err != nil {
		return err
	}
	var bom struct {
		BOMFormat string `json:"bomFormat"`
	}
	data, err := readfile.Read(path, maxSBOM)
	if err != nil || json.Unmarshal(data, &bom) != nil || bom.BOMFormat != "CycloneDX" {
		return fmt.Errorf("%s is there and is no CycloneDX SBOM: kvgen writes the archive's SBOM there; move it away, or name another archive", suggest.Show(path))
	}
	return nil
}

// archiveFile is a file of a docker archive other than a blob.
type archiveFile struct {
	name string
	data []byte
}

// archiveFiles are the files beside a docker archive's blobs, in the
// order the tar holds them: index.json, for OCI tools, whose root has
// the names docker save gives it; manifest.json, which docker load
// reads; and oci-layout. tag is the archive's NAME:TAG, or "".
func archiveFiles(root ocispec.Descriptor, m ocispec.Manifest, tag string) []archiveFile {
	entry := dockerManifestEntry{Config: blobPath(m.Config), RepoTags: []string{}}
	if tag != "" {
		entry.RepoTags = []string{tag}
	}
	for _, l := range m.Layers {
		entry.Layers = append(entry.Layers, blobPath(l))
	}
	dockerJSON, _ := json.Marshal([]dockerManifestEntry{entry})
	if tag != "" {
		// As docker save names it: the full name, and the tag alone.
		_, short, _ := strings.Cut(tag[strings.LastIndexByte(tag, '/')+1:], ":")
		root.Annotations = map[string]string{"io.containerd.image.name": tag, ocispec.AnnotationRefName: short}
	}
	index := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{root}}
	indexJSON, _ := json.Marshal(index)
	layoutJSON, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	return []archiveFile{{"index.json", indexJSON}, {"manifest.json", dockerJSON}, {"oci-layout", layoutJSON}}
}

// archiveBlobs are the blobs of pi's image, m its manifest, each once and
// sorted by digest, so that an archive's bytes are the same from build to
// build. The SBOM's manifest stays out: docker load would take it for an
// image.
func archiveBlobs(pi PlatformImage, m ocispec.Manifest) []ocispec.Descriptor {
	blobs := onceEach(append([]ocispec.Descriptor{pi.Manifest, m.Config}, m.Layers...))
	slices.SortFunc(blobs, func(a, b ocispec.Descriptor) int { return strings.Compare(a.Digest.String(), b.Digest.String()) })
	return blobs
}

// writeTar writes a docker archive's tar to w: the blobs' directories,
// the blobs, then files.
func (img *Image) writeTar(ctx context.Context, w io.Writer, blobs []ocispec.Descriptor, files []archiveFile) error {
	tw := tar.NewWriter(w)
	for _, name := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	for _, d := range blobs {
		if err := img.tarBlob(ctx, tw, d); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := tarPut(tw, f.name, int64(len(f.data)), bytes.NewReader(f.data)); err != nil {
			return err
		}
	}
	return tw.Close()
}

// tarBlob adds the blob d to the tar, checked at its end, as a layout's
// blobs are: a base's blob whose bytes are not its digest's is no part of
// the archive.
func (img *Image) tarBlob(ctx context.Context, tw *tar.Writer, d ocispec.Descriptor) error {
	r, err := img.Fetch(ctx, d)
	if err != nil {
		return err
	}
	defer r.Close()
	err = tarPut(tw, blobPath(d), d.Size, verify(r, d))
	if err != nil && !strings.Contains(err.Error(), d.Digest.String()) {
		err = fmt.Errorf("blob %s: %w", d.Digest, err) // verify names it already
	}
	return err
}

// tarPut adds a file of size bytes read from r to the tar, with a fixed
// mode and time, so that an archive's bytes are the same from build to
// build.
func tarPut(tw *tar.Writer, name string, size int64, r io.Reader) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}
