package ociimage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/kvgen/kvgen/internal/readfile"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Remote says how to reach registries. Copies of a Remote share its
// total time (WithTotal): one command's exchanges count against one clock.
type Remote struct {
	// Insecure reaches loopback registries over plain HTTP; it is refused
	// for any other host, and allows plain HTTP to the registry named
	// alone, not to where it redirects or sends for a token.
	Insecure bool
	// Timeout bounds each HTTP request's wait for a response's headers;
	// zero is a minute.
	Timeout time.Duration
	// MinRate is the least a body, sent or received, must move per
	// second, measured over each period of 30 s from its start: a body
	// slower than that ends its exchange with an error. Zero is no
	// minimum.
	MinRate int64
	// RootCAs, when set, are the certificate authorities a registry's
	// TLS certificate is checked against, instead of the system's (which
	// SSL_CERT_FILE and SSL_CERT_DIR can name).
	RootCAs *x509.CertPool

	clock *clock
	// grace is MinRate's period; zero is 30 s. Tests shorten it.
	grace time.Duration
	// realms, when set, replaces oras's denylist of token realm
	// addresses, which refuses loopback realms; tests serve their realms
	// on loopback.
	realms []netip.Prefix
}

// WithTotal returns rm with a total time for the registry exchanges made
// through it and its copies: the time during which at least one is under
// way, so that what a command does between them (compiling, between a
// base's reads and a push) is not counted. An exchange still under way
// when it runs out ends with an error; zero is no total.
func (rm Remote) WithTotal(d time.Duration) Remote {
	rm.clock = nil
	if d > 0 {
		rm.clock = &clock{limit: d}
	}
	return rm
}

// repository is the registry repository of ref, with the credentials of
// Docker's configuration ($DOCKER_CONFIG/config.json, else
// ~/.docker/config.json) and its credential helpers, as docker and oras
// use them. Every request it makes passes a transport that holds it to
// rm's host policy and bounds.
func (rm Remote) repository(ref Ref) (*remote.Repository, error) {
	repo, err := remote.NewRepository(ref.Remote.Registry + "/" + ref.Remote.Repository)
	if err != nil {
		return nil, err
	}
	if err := rm.Check(ref); err != nil {
		return nil, err
	}
	repo.PlainHTTP = rm.Insecure
	repo.MaxMetadataBytes = maxJSON
	repo.ReferrerListMaxPages = maxReferrerPages
	// Without the referrers API, oras links an SBOM through the tag
	// sha256-<image digest>, and deletes the manifest the tag named
	// before: whoever may push could tag any manifest so, and have a
	// build delete it with the builder's credentials.
	repo.SkipReferrersGC = true
	if err := checkDockerConfig(); err != nil {
		return nil, fmt.Errorf("reading Docker's credentials: %w", err)
	}
	store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading Docker's credentials: %w", err)
	}
	timeout := rm.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	next := http.DefaultTransport.(*http.Transport).Clone()
	next.ResponseHeaderTimeout = timeout
	if rm.RootCAs != nil {
		next.TLSClientConfig = &tls.Config{RootCAs: rm.RootCAs}
	}
	scheme := "https"
	if rm.Insecure {
		scheme = "http"
	}
	t := &transport{
		next:      next,
		registry:  hostPort(&url.URL{Scheme: scheme, Host: ref.Remote.Host()}),
		plainHTTP: rm.Insecure,
		clock:     rm.clock,
		minRate:   rm.MinRate,
		grace:     rm.grace,
	}
	repo.Client = &auth.Client{
		Client:               &http.Client{Transport: t},
		Cache:                auth.NewCache(),
		Credential:           credentials.Credential(store),
		BlockedRealmPrefixes: rm.realms,
	}
	return repo, nil
}

// Check says whether rm can reach ref: -insecure (plain HTTP) is only for
// registries on loopback.
func (rm Remote) Check(ref Ref) error {
	if rm.Insecure && ref.Kind == Registry && !IsLoopback(ref.Remote.Registry) {
		return fmt.Errorf("-insecure (plain HTTP) is only for a registry on this machine's loopback, not %s", suggest.Quote(ref.Remote.Registry))
	}
	return nil
}

// source is an image's store, to read from, and its root's descriptor.
type source interface {
	oras.ReadOnlyGraphTarget
}

// open opens the image at ref to read, and resolves its root; a layout's
// or an archive's reads spend from b.
func (rm Remote) open(ctx context.Context, ref Ref, b *budget) (source, ocispec.Descriptor, error) {
	var src source
	var name string
	switch ref.Kind {
	case Registry:
		repo, err := rm.repository(ref)
		if err != nil {
			return nil, ocispec.Descriptor{}, fmt.Errorf("image %s: %w", suggest.Show(ref.String()), err)
		}
		src, name = repo, ref.Remote.Reference
	case Layout, Archive:
		if ref.Kind == Layout {
			fi, err := os.Stat(ref.Path)
			if err != nil {
				return nil, ocispec.Descriptor{}, fmt.Errorf("image %s: %w", suggest.Show(ref.String()), err)
			}
			if !fi.IsDir() {
				return nil, ocispec.Descriptor{}, fmt.Errorf("image %s: %s is not a directory", suggest.Show(ref.String()), suggest.Show(ref.Path))
			}
		}
		s, err := openLocal(ctx, ref, b)
		if err != nil {
			return nil, ocispec.Descriptor{}, fmt.Errorf("image %s: %w", suggest.Show(ref.String()), err)
		}
		src = s
		if ref.Kind == Layout {
			name = ref.Tag
		} // an archive's one image, whatever its name
	}
	var root ocispec.Descriptor
	var err error
	if name != "" {
		root, err = src.Resolve(ctx, name)
	} else {
		root, err = onlyRoot(ctx, src.(*localStore), ref)
	}
	if err != nil {
		return nil, root, fmt.Errorf("image %s: %w", suggest.Show(ref.String()), err)
	}
	return src, root, nil
}

// onlyRoot is the one image of a layout or archive given without a tag:
// the one manifest or index its index.json lists that is not an artifact
// such as an SBOM.
func onlyRoot(ctx context.Context, s *localStore, ref Ref) (ocispec.Descriptor, error) {
	roots, err := s.roots(ctx)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	switch len(roots) {
	case 1:
		return roots[0], nil
	case 0:
		return ocispec.Descriptor{}, errors.New("holds no image")
	}
	return ocispec.Descriptor{}, fmt.Errorf("holds %d images; name one as %s:TAG", len(roots), suggest.Show(ref.String()))
}

// maxDockerConfig bounds Docker's config file.
const maxDockerConfig = 1 << 20

// checkDockerConfig reads Docker's config, where Docker reads it
// ($DOCKER_CONFIG/config.json, else ~/.docker/config.json), as a bounded
// regular file, and checks the credential helpers it names: each is the
// program docker-credential-NAME found on PATH, and a NAME with a path
// separator in it would run a file of the working directory instead.
func checkDockerConfig() error {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil // no config to read
		}
		dir = filepath.Join(home, ".docker")
	}
	path := filepath.Join(dir, "config.json")
	data, err := readfile.Read(path, maxDockerConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// Keyed exactly, as oras reads it: a struct would take "credsstore"
	// for "credsStore", and check a value oras does not run.
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", suggest.Show(path), err)
	}
	var store string
	var perHost map[string]string
	if raw, ok := cfg["credsStore"]; ok {
		if err := json.Unmarshal(raw, &store); err != nil {
			return fmt.Errorf("%s: credsStore: %w", suggest.Show(path), err)
		}
	}
	if raw, ok := cfg["credHelpers"]; ok {
		if err := json.Unmarshal(raw, &perHost); err != nil {
			return fmt.Errorf("%s: credHelpers: %w", suggest.Show(path), err)
		}
	}
	helpers := append([]string{store}, slices.Sorted(maps.Values(perHost))...)
	for _, h := range helpers {
		if strings.ContainsAny(h, `/\`) {
			return fmt.Errorf("%s names the credential helper %s: a helper is a program docker-credential-NAME on PATH, and its NAME has no path separator", suggest.Show(path), suggest.Quote(h))
		}
	}
	return nil
}
