package ociimage

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
)

// Referrers that inspect -sbom reads for one image, at most.
const (
	maxReferrerPages = 16
	maxReferrers     = 1000
)

// sbomReferrers lists an image's referrers of the SBOM's artifact type,
// each once: a registry may list one manifest twice (its referrers API and
// the tag it falls back to, or one page again), which is still one SBOM.
func sbomReferrers(ctx context.Context, src source, d ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	refs, err := listReferrers(ctx, src, d)
	if err != nil {
		return nil, err
	}
	return onceEach(refs), nil
}

// onceEach returns ds with each digest's first descriptor alone, in order;
// it reuses ds's array.
func onceEach(ds []ocispec.Descriptor) []ocispec.Descriptor {
	seen := make(map[digest.Digest]bool, len(ds))
	return slices.DeleteFunc(ds, func(d ocispec.Descriptor) bool {
		dup := seen[d.Digest]
		seen[d.Digest] = true
		return dup
	})
}

// listReferrers lists an image's referrers of the SBOM's artifact type, as
// the source lists them. A registry's list comes in pages, each at most 4
// MiB: at most maxReferrerPages of them (the repository's
// ReferrerListMaxPages) and maxReferrers in all are read.
func listReferrers(ctx context.Context, src source, d ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	repo, ok := src.(*remote.Repository)
	if !ok {
		return registry.Referrers(ctx, src, d, SBOMArtifactType)
	}
	var refs []ocispec.Descriptor
	err := repo.Referrers(ctx, d, SBOMArtifactType, func(page []ocispec.Descriptor) error {
		if len(refs)+len(page) > maxReferrers {
			return fmt.Errorf("the registry lists more than %d referrers of its SBOM's type, the most kvgen reads", maxReferrers)
		}
		refs = append(refs, page...)
		return nil
	})
	if errors.Is(err, errdef.ErrTooManyPages) {
		return nil, fmt.Errorf("the registry lists its referrers in more than %d pages, the most kvgen reads: %w", maxReferrerPages, err)
	}
	return refs, err
}
