package ociimage

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests below run registries of their own on loopback, which serve
// an image and misbehave as each test says: they need no registry
// program.

// fakeRegistry serves img under one tag, and its SBOMs as referrers;
// hook, if set, answers a request first (returning true when it did).
type fakeRegistry struct {
	img  *Image
	hook func(w http.ResponseWriter, r *http.Request) bool
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.hook != nil && f.hook(w, r) {
		return
	}
	ctx := r.Context()
	_, rest, _ := strings.Cut(r.URL.Path, "/v2/tiny/")
	kind, ref, _ := strings.Cut(rest, "/")
	if kind == "referrers" {
		index := ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}}
		index.SchemaVersion = 2
		for _, pi := range f.img.Platforms {
			if pi.Manifest.Digest.String() == ref {
				index.Manifests = append(index.Manifests, pi.SBOM)
			}
		}
		w.Header().Set("Content-Type", ocispec.MediaTypeImageIndex)
		json.NewEncoder(w).Encode(index)
		return
	}
	blobs, err := f.img.blobs(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var d ocispec.Descriptor
	for _, b := range blobs {
		if b.Digest.String() == ref || (ref == "edge" && b.Digest == f.img.Root.Digest) {
			d = b
		}
	}
	if d.Digest == "" {
		http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", d.MediaType)
	w.Header().Set("Docker-Content-Digest", d.Digest.String())
	w.Header().Set("Content-Length", fmt.Sprint(d.Size))
	if r.Method == http.MethodHead {
		return
	}
	rc, err := f.img.Fetch(ctx, d)
	if err != nil {
		return
	}
	defer rc.Close()
	io.Copy(w, rc)
}

// answerReferrers has f answer its referrers requests with answer.
func (f *fakeRegistry) answerReferrers(answer func(w http.ResponseWriter, r *http.Request)) {
	f.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/referrers/") {
			return false
		}
		answer(w, r)
		return true
	}
}

// servedTiny serves image(t) from a fakeRegistry, returning them and the
// image's reference on it.
func servedTiny(t *testing.T) (*Image, *fakeRegistry, string) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	img := image(t)
	reg := &fakeRegistry{img: img}
	srv := serve(t, listen(t, "127.0.0.1:0"), reg, nil)
	return img, reg, srv.Listener.Addr().String() + "/tiny:edge"
}

// listen listens on addr (127.0.0.2 too: Linux routes all of 127/8 to
// lo), or skips where the system does not.
func listen(t *testing.T, addr string) net.Listener {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("no loopback address %s here: %v", addr, err)
	}
	return l
}

// serve serves h on l, over TLS with cert if it is set.
func serve(t *testing.T, l net.Listener, h http.Handler, cert *tls.Certificate) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = l
	if cert != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// counter counts the requests a server gets, and those with an
// Authorization header.
type counter struct{ all, authorized atomic.Int64 }

func (c *counter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.all.Add(1)
		if r.Header.Get("Authorization") != "" {
			c.authorized.Add(1)
		}
		h.ServeHTTP(w, r)
	})
}

// counted serves img on addr, counting the requests it gets.
func counted(t *testing.T, img *Image, addr string, cert *tls.Certificate) (*httptest.Server, *counter) {
	c := &counter{}
	return serve(t, listen(t, addr), c.wrap(&fakeRegistry{img: img}), cert), c
}

// blobsAt is a fakeRegistry hook that redirects requests for blobs to
// target, as a registry does to its storage.
func blobsAt(target *httptest.Server) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/blobs/") {
			return false
		}
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
		return true
	}
}

// fastRemote is a Remote for a loopback registry over plain HTTP whose
// minimum rate applies after 200 ms instead of 30 s.
func fastRemote(minRate int64) Remote {
	return Remote{Insecure: true, MinRate: minRate, grace: 200 * time.Millisecond}
}

// A manifest sent one byte at a time (B12) ends in an error naming the
// registry, its rate and the flag, once the grace period has passed:
// not after the manifest's whole size at that pace.
func TestRegistrySlowManifestIsCut(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	img := image(t)
	reg := &fakeRegistry{img: img}
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/manifests/") {
			return false
		}
		w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
		for range 1000 {
			w.Write([]byte(" "))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return true
			case <-time.After(100 * time.Millisecond):
			}
		}
		return true
	}
	srv := serve(t, listen(t, "127.0.0.1:0"), reg, nil)
	host := srv.Listener.Addr().String()
	err := inspectErr(t, host+"/tiny:edge", fastRemote(64<<10), false)
	require.Error(t, err)
	assert.Regexp(t, `the registry `+host+` sent \d+ B in 200ms \([\d.]+ B/s\), slower than -registry-min-rate \(64 KiB/s\); a slower link needs a lower -registry-min-rate, or 0 for none`, err.Error())
}

// An endless layer, sent fast (B12), ends at the command's total
// registry time, with an error naming -registry-timeout; that time is
// the command's, so the next exchange through the same Remote fails at
// once.
func TestRegistryEndlessLayerEndsAtTheTotal(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	// A config whose entrypoint no layer has, and one layer: a tar
	// whose first file claims a TiB and never ends.
	cfg := []byte(`{"os":"linux","architecture":"amd64","config":{"Entrypoint":["/srv"]},"rootfs":{"type":"layers","diff_ids":[]}}`)
	cfgDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(cfg), Size: int64(len(cfg))}
	layer := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: digest.FromString("endless"), Size: 1 << 40}
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, Config: cfgDesc, Layers: []ocispec.Descriptor{layer}}
	m.SchemaVersion = 2
	manifest, err := json.Marshal(m)
	require.NoError(t, err)
	var layerRequests atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var data []byte
		var mt string
		switch {
		case strings.Contains(r.URL.Path, "/manifests/"):
			data, mt = manifest, ocispec.MediaTypeImageManifest
		case strings.HasSuffix(r.URL.Path, cfgDesc.Digest.String()):
			data, mt = cfg, cfgDesc.MediaType
		case strings.HasSuffix(r.URL.Path, layer.Digest.String()):
			layerRequests.Add(1)
			tw := tar.NewWriter(w)
			tw.WriteHeader(&tar.Header{Name: "filler", Typeflag: tar.TypeReg, Size: 1 << 40, Mode: 0o644})
			zeros := make([]byte, 64<<10)
			for r.Context().Err() == nil {
				if _, err := w.Write(zeros); err != nil {
					return
				}
			}
			return
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", mt)
		w.Header().Set("Docker-Content-Digest", digest.FromBytes(data).String())
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Write(data)
	})
	srv := serve(t, listen(t, "127.0.0.1:0"), h, nil)
	host := srv.Listener.Addr().String()
	rm := fastRemote(64 << 10).WithTotal(time.Second)
	ref := host + "/tiny:edge"
	err = inspectErr(t, ref, rm, false)
	require.Error(t, err)
	assert.Equal(t, int64(1), layerRequests.Load())
	assert.Contains(t, err.Error(), "the registry "+host+": the command's registry exchanges took all of -registry-timeout (1s); a larger image or a slower link needs a larger -registry-timeout")

	require.ErrorContains(t, inspectErr(t, ref, rm, false), "took all of -registry-timeout (1s)")
}

// A registry that takes a blob's upload at a trickle (B12) fails the
// push once the grace period has passed, saying so.
func TestRegistrySlowUploadIsCut(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	done := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			w.Header().Set("Location", "/v2/tiny/blobs/uploads/1")
			w.WriteHeader(http.StatusAccepted)
		case http.MethodPut:
			buf := make([]byte, 1<<10)
			for {
				if _, err := r.Body.Read(buf); err != nil {
					return
				}
				select {
				case <-done: // what the socket holds would take a while
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		default:
			http.NotFound(w, r)
		}
	})
	srv := serve(t, listen(t, "127.0.0.1:0"), h, nil)
	t.Cleanup(func() { close(done) })
	host := srv.Listener.Addr().String()
	repo, err := fastRemote(1 << 20).repository(must(ParseRef(host + "/tiny:edge")))
	require.NoError(t, err)
	// More than the socket buffers hold, so that the registry's pace
	// shows.
	size := int64(256 << 20)
	d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: digest.FromString("big"), Size: size}
	err = repo.Push(context.Background(), d, io.LimitReader(zeroReader{}, size))
	require.Error(t, err)
	t.Log(err)
	assert.Regexp(t, `the registry `+host+` took [\d.]+ K?i?B in 200ms \([\d.]+ K?i?B/s\), slower than -registry-min-rate \(1 MiB/s\)`, err.Error())
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// -insecure allows plain HTTP to the registry named alone (B13): a
// redirect to another loopback host over plain HTTP, or to another port
// of the same one, is refused before anything is sent there, and so is
// a token realm there.
func TestRegistryInsecureIsForTheNamedHostAlone(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	img := image(t)
	var elsewhere counter
	other := serve(t, listen(t, "127.0.0.2:0"), elsewhere.wrap(&fakeRegistry{img: img}), nil)
	samehost := serve(t, listen(t, "127.0.0.1:0"), elsewhere.wrap(&fakeRegistry{img: img}), nil)
	for _, target := range []string{other.URL, samehost.URL} {
		reg := &fakeRegistry{img: img}
		reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
			http.Redirect(w, r, target+r.URL.Path, http.StatusTemporaryRedirect)
			return true
		}
		srv := serve(t, listen(t, "127.0.0.1:0"), reg, nil)
		err := inspectErr(t, srv.Listener.Addr().String()+"/tiny:edge", Remote{Insecure: true}, false)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "refused plain HTTP to "+strings.TrimPrefix(target, "http://")+": -insecure allows it only to the registry named, "+srv.Listener.Addr().String())
	}

	reg := &fakeRegistry{img: img}
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+other.URL+`/token",service="tiny"`)
		w.WriteHeader(http.StatusUnauthorized)
		return true
	}
	srv := serve(t, listen(t, "127.0.0.1:0"), reg, nil)
	rm := Remote{Insecure: true, realms: []netip.Prefix{}}
	err := inspectErr(t, srv.Listener.Addr().String()+"/tiny:edge", rm, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused plain HTTP to "+other.Listener.Addr().String())
	assert.Zero(t, elsewhere.all.Load(), "requests that reached the other hosts")
}

// Without -insecure, nothing goes over plain HTTP (B13): an HTTPS
// registry's redirect to HTTP is refused before anything is sent.
func TestRegistryRedirectToPlainHTTPIsRefused(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	img := image(t)
	cert, pool := loopbackCert(t)
	target, plain := counted(t, img, "127.0.0.1:0", nil)
	reg := &fakeRegistry{img: img, hook: blobsAt(target)}
	srv := serve(t, listen(t, "127.0.0.1:0"), reg, cert)
	err := inspectErr(t, srv.Listener.Addr().String()+"/tiny:edge", Remote{RootCAs: pool}, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused plain HTTP to "+target.Listener.Addr().String()+": without -insecure, registries are reached over HTTPS only, redirects included")
	assert.Zero(t, plain.all.Load(), "requests over plain HTTP")
}

// An HTTPS redirect to another host, such as a blob's to its storage,
// is followed, without the registry's credentials; a token realm on
// another host gets none either: with credentials in Docker's config,
// the exchange is refused, and without, the realm's anonymous token is
// used.
func TestRegistryCredentialsStayWithTheirHost(t *testing.T) {
	img := image(t)
	cert, pool := loopbackCert(t)
	storage, cdn := counted(t, img, "127.0.0.2:0", cert)

	// A registry that wants basic auth, and keeps its blobs elsewhere.
	reg := &fakeRegistry{img: img}
	redirect := blobsAt(storage)
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if user, pass, ok := r.BasicAuth(); !ok || user != "kvgen" || pass != testPassword {
			w.Header().Set("WWW-Authenticate", `Basic realm="tiny"`)
			w.WriteHeader(http.StatusUnauthorized)
			return true
		}
		return redirect(w, r)
	}
	srv := serve(t, listen(t, "127.0.0.1:0"), reg, cert)
	host := srv.Listener.Addr().String()
	dockerConfig(t, host, testPassword)
	rm := Remote{RootCAs: pool}
	ref := host + "/tiny:edge"
	require.NoError(t, inspectErr(t, ref, rm, false))
	assert.NotZero(t, cdn.all.Load(), "requests to the blobs' storage")
	assert.Zero(t, cdn.authorized.Load(), "requests to the blobs' storage with credentials")

	// A registry whose token realm is on another host.
	var tokens counter
	tokenServer := serve(t, listen(t, "127.0.0.2:0"), tokens.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"token":"anonymous"}`)
	})), cert)
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "Bearer anonymous" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+tokenServer.URL+`/token",service="tiny"`)
			w.WriteHeader(http.StatusUnauthorized)
			return true
		}
		return false
	}
	rm.realms = []netip.Prefix{} // oras refuses loopback realms
	err := inspectErr(t, ref, rm, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused to send the credentials for "+host+" to "+tokenServer.Listener.Addr().String()+", another host")
	assert.Zero(t, tokens.all.Load(), "requests to the token realm")

	t.Setenv("DOCKER_CONFIG", t.TempDir())
	require.NoError(t, inspectErr(t, ref, rm, false))
	assert.NotZero(t, tokens.all.Load(), "requests to the token realm")
	assert.Zero(t, tokens.authorized.Load(), "requests to the token realm with credentials")
}

// inspect -sbom reads at most 16 pages of an image's referrers (B2),
// however many the registry links, and 1000 referrers.
func TestRegistryReferrersAreCapped(t *testing.T) {
	img, reg, ref := servedTiny(t)
	var pages atomic.Int64
	reg.answerReferrers(func(w http.ResponseWriter, r *http.Request) {
		if pages.Add(1) > 200 {
			http.Error(w, "enough", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", ocispec.MediaTypeImageIndex)
		w.Header().Set("Link", fmt.Sprintf(`<%s?page=%d>; rel="next"`, r.URL.Path, pages.Load()))
		io.WriteString(w, `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)
	})
	err := inspectErr(t, ref, Remote{Insecure: true}, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "finding its SBOM: the registry lists its referrers in more than 16 pages, the most kvgen reads")
	assert.Equal(t, int64(16), pages.Load())

	sbom := img.Platforms[0].SBOM
	reg.answerReferrers(func(w http.ResponseWriter, r *http.Request) {
		index := ocispec.Index{MediaType: ocispec.MediaTypeImageIndex}
		for i := range 1001 {
			d := sbom
			d.Digest = digest.FromString(fmt.Sprint(i))
			index.Manifests = append(index.Manifests, d)
		}
		w.Header().Set("Content-Type", ocispec.MediaTypeImageIndex)
		json.NewEncoder(w).Encode(index)
	})
	err = inspectErr(t, ref, Remote{Insecure: true}, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the registry lists more than 1000 referrers of its SBOM's type, the most kvgen reads")
}

// A registry that lists one SBOM twice, or on two pages, lists one SBOM:
// inspect -sbom reads it, where two different ones are refused
// (TestOneImageListedManyTimesAndTwoSBOMs).
func TestRegistryListingOneSBOMTwiceListsOne(t *testing.T) {
	img, reg, ref := servedTiny(t)
	var pages atomic.Int64
	reg.answerReferrers(func(w http.ResponseWriter, r *http.Request) {
		index := ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{img.Platforms[0].SBOM, img.Platforms[0].SBOM}}
		index.SchemaVersion = 2
		if pages.Add(1) == 1 {
			w.Header().Set("Link", fmt.Sprintf(`<%s?page=2>; rel="next"`, r.URL.Path))
		}
		w.Header().Set("Content-Type", ocispec.MediaTypeImageIndex)
		json.NewEncoder(w).Encode(index)
	})
	found, err := Inspect(context.Background(), must(ParseRef(ref)), Remote{Insecure: true}, true)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.NoError(t, found[0].Err)
	assert.Equal(t, int64(2), pages.Load(), "both pages read")
	assert.Contains(t, string(found[0].SBOM), `"bomFormat": "CycloneDX"`)
}

// The fake registry serves what Inspect reads back whole.
func TestFakeRegistryServesTheImage(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	img := image(t)
	srv := serve(t, listen(t, "127.0.0.1:0"), &fakeRegistry{img: img}, nil)
	rm := fastRemote(64 << 10).WithTotal(time.Minute)
	ref := must(ParseRef(srv.Listener.Addr().String() + "/tiny:edge"))
	inspectBack(t, ref, rm, img)
}
