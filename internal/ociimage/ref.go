// Package ociimage packages a deployment's binaries as OCI images, one per
// Linux platform and an image index over several, with a CycloneDX SBOM
// attached to each platform's image; and reads such images back. Images
// go where skopeo's transports name them: a registry, an OCI layout
// directory (oci:DIR[:TAG]) or a tarball that docker load accepts
// (docker-archive:FILE[:NAME:TAG]).
//
// What it writes is a function of its inputs alone: fixed timestamps,
// sorted tar entries with fixed owners and modes, and gzip with a fixed
// header, so two builds of one deployment have one digest.
package ociimage

import (
	"fmt"
	"net"
	"regexp"
	"strings"

	"oras.land/oras-go/v2/registry"

	"github.com/kvgen/kvgen/internal/suggest"
)

// Kind is where an image is: a registry, an OCI layout, a docker archive.
type Kind int

const (
	Registry Kind = iota
	Layout
	Archive
)

// Ref is where an image goes, or is read from.
type Ref struct {
	Kind Kind
	// Path is the layout's directory or the archive's file.
	Path string
	// Tag is the layout's tag, org.opencontainers.image.ref.name in its
	// index.json, or the archive's NAME:TAG, which docker load tags the
	// image with; "" for none.
	Tag string
	// Remote is the registry's reference; its Reference is a tag or a
	// digest, "latest" when the text gave none.
	Remote registry.Reference
	text   string
}

// String is the reference as it was given.
func (r Ref) String() string { return r.text }

// tagPattern is what a tag may be, as the distribution spec says.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// dockerTag is the NAME:TAG a docker archive can give its image, as
// docker tags images: a lower-case repository, its host first if any.
var dockerTag = regexp.MustCompile(`^([a-z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// ParseRef parses an image reference: oci:DIR[:TAG],
// docker-archive:FILE[:NAME:TAG], or a registry's
// HOST/REPOSITORY[:TAG|@DIGEST].
func ParseRef(s string) (Ref, error) {
	r := Ref{text: s}
	switch {
	case strings.HasPrefix(s, "oci:"):
		r.Kind = Layout
		r.Path, r.Tag, _ = strings.Cut(strings.TrimPrefix(s, "oci:"), ":")
		if r.Tag != "" && !tagPattern.MatchString(r.Tag) {
			return r, fmt.Errorf("image %s: tag %s is not a tag: letters, digits, '_', '.' and '-', at most 128, not starting with '.' or '-'", suggest.Show(s), suggest.Quote(r.Tag))
		}
	case strings.HasPrefix(s, "docker-archive:"):
		r.Kind = Archive
		r.Path, r.Tag, _ = strings.Cut(strings.TrimPrefix(s, "docker-archive:"), ":")
		if r.Tag != "" && !dockerTag.MatchString(r.Tag) {
			return r, fmt.Errorf("image %s: %s is not a name and tag for docker load, such as kvserver:edge or registry.example/team/kvserver:edge", suggest.Show(s), suggest.Quote(r.Tag))
		}
	default:
		ref, err := registry.ParseReference(strings.TrimPrefix(s, "docker://"))
		if err != nil {
			return r, fmt.Errorf("image %s is not a reference: want HOST/REPOSITORY[:TAG], such as registry.example/team/kvserver:edge, oci:DIR[:TAG] or docker-archive:FILE[:NAME:TAG] (%v)", suggest.Show(s), err)
		}
		if ref.Reference == "" {
			ref.Reference = "latest"
		}
		r.Remote = ref
		return r, nil
	}
	if r.Path == "" {
		return r, fmt.Errorf("image %s names no path", suggest.Show(s))
	}
	return r, nil
}

// IsLoopback reports whether a registry's host is this machine: localhost
// or a loopback address, with or without a port.
func IsLoopback(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = strings.Trim(host, "[]")
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
