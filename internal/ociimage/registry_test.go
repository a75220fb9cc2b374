package ociimage

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/errdef"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// The tests below push to a registry server they start on loopback:
// distribution's registry program, which .ci/run installs onto PATH
// (go install github.com/distribution/distribution/v3/cmd/registry). They
// skip without it, saying so, except in CI.

// testPassword is the password of user kvgen in testdata/htpasswd, a
// bcrypt hash made once for the tests, at bcrypt's lowest cost (4): the
// registry checks it on every request, and at the usual cost of 10 each
// check takes tens of milliseconds.
const testPassword = "kvgen-test-password"

// registryProgram finds the registry program, or skips (fails, in CI).
func registryProgram(t *testing.T) string {
	t.Helper()
	prog, err := kvgentest.RegistryProgram()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return prog
}

type registryOptions struct {
	auth, tls bool
}

// startRegistry starts a registry on a free loopback port, stopped when
// the test ends.
func startRegistry(t *testing.T, opts registryOptions) *kvgentest.Registry {
	t.Helper()
	prog := registryProgram(t)
	dir := t.TempDir()
	var ro kvgentest.RegistryOptions
	if opts.tls {
		ro.Cert, ro.Key = selfSigned(t, dir)
	}
	if opts.auth {
		htpasswd, err := filepath.Abs("testdata/htpasswd")
		require.NoError(t, err)
		ro.Htpasswd = htpasswd
	}
	reg, err := kvgentest.StartRegistry(prog, dir, ro)
	require.NoError(t, err)
	t.Cleanup(reg.Stop)
	return reg
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	der, priv := testCert(t, net.IPv4(127, 0, 0, 1))
	keyDER, err := x509.MarshalECPrivateKey(priv)
	require.NoError(t, err)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return cert, key
}

// loopbackCert is a certificate for 127.0.0.1 and 127.0.0.2, and a pool
// that trusts it.
func loopbackCert(t *testing.T) (*tls.Certificate, *x509.CertPool) {
	der, priv := testCert(t, net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2))
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}, pool
}

// testCert is a self-signed certificate for ips, in DER, and its key.
func testCert(t *testing.T, ips ...net.IP) ([]byte, *ecdsa.PrivateKey) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kvgen test registry"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           ips,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	require.NoError(t, err)
	return der, priv
}

// dockerConfig points DOCKER_CONFIG at a config.json that logs in to host
// as kvgen with password, as docker login writes it.
func dockerConfig(t *testing.T, host, password string) {
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("kvgen:" + password))
	cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600))
	t.Setenv("DOCKER_CONFIG", dir)
}

// An index of two platforms pushed over plain HTTP to a loopback
// registry reads back whole: every platform, its registry, its SBOM as a
// referrer, and the binary runs. Pushed again, it has the same digest.
func TestPushToRegistry(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := startRegistry(t, registryOptions{})
	ctx := context.Background()
	img := index(t)
	ref := must(ParseRef(reg.Host + "/team/tiny:edge"))
	rm := Remote{Insecure: true}
	require.NoError(t, Write(ctx, img, ref, rm))
	inspectBack(t, ref, rm, img)

	again, err := Build(ctx, options(platforms(t)))
	require.NoError(t, err)
	require.NoError(t, Write(ctx, again, ref, rm))
	assert.Equal(t, img.Root.Digest, again.Root.Digest)

	// An image on that one as its base, pushed to another repository,
	// names its base and brings the base's layers along.
	opts := options(platforms(t))
	opts.Base, opts.Remote = ref.String(), rm
	on, err := Build(ctx, opts)
	require.NoError(t, err)
	_, withinBudget := on.base.(budgeted)
	assert.True(t, withinBudget, "a registry's base is read within a budget (TestRegistryBaseIsBudgeted)")
	onRef := must(ParseRef(reg.Host + "/team/app:v1"))
	require.NoError(t, Write(ctx, on, onRef, rm))
	inspectBack(t, onRef, rm, on)
	var cfg ocispec.Image
	m, err := fetchManifest(ctx, on, on.Platforms[0].Manifest)
	require.NoError(t, err)
	require.NoError(t, fetchJSON(ctx, on, m.Config, &cfg))
	assert.Equal(t, ref.String(), cfg.Config.Labels[ocispec.AnnotationBaseImageName])

	// -insecure is for loopback only.
	err = Write(ctx, img, must(ParseRef("registry.example/team/tiny:edge")), rm)
	require.ErrorContains(t, err, "-insecure (plain HTTP) is only for a registry on this machine's loopback")
}

// With basic auth and TLS, the credentials come from Docker's config;
// wrong ones are refused, saying so, and nothing is tagged.
func TestPushWithAuthAndTLS(t *testing.T) {
	reg := startRegistry(t, registryOptions{auth: true, tls: true})
	ctx := context.Background()
	img := image(t)
	ref := must(ParseRef(reg.Host + "/tiny:v1"))
	rm := Remote{RootCAs: reg.Roots}

	dockerConfig(t, reg.Host, "wrong")
	err := Write(ctx, img, ref, rm)
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), "image "+reg.Host+"/tiny:v1: linux/amd64: pushing the image:")
	assert.Contains(t, err.Error(), "the registry "+reg.Host+" refused the credentials")

	// Without the registry's CA, TLS fails.
	dockerConfig(t, reg.Host, testPassword)
	err = Write(ctx, img, ref, Remote{})
	require.ErrorContains(t, err, "certificate")

	require.NoError(t, Write(ctx, img, ref, rm))
	inspectBack(t, ref, rm, img)

	// The credentials may come from a credential helper instead, as
	// Docker's config names one for the registry.
	if runtime.GOOS != "windows" {
		credHelper(t, reg.Host, testPassword)
		ref2 := must(ParseRef(reg.Host + "/helped:v1"))
		require.NoError(t, Write(ctx, img, ref2, rm))
		inspectBack(t, ref2, rm, img)
	}
}

// credHelper puts on PATH a credential helper, docker-credential-kvgentest,
// that gives kvgen and password for host, and points DOCKER_CONFIG at a
// config.json that names it for host.
func credHelper(t *testing.T, host, password string) {
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\n[ \"$1\" = get ] || exit 1\nread server\nprintf '{\"ServerURL\":\"%%s\",\"Username\":\"kvgen\",\"Secret\":\"%s\"}' \"$server\"\n", password)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "docker-credential-kvgentest"), []byte(script), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cfg := fmt.Sprintf(`{"credHelpers":{%q:"kvgentest"}}`, host)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600))
	t.Setenv("DOCKER_CONFIG", dir)
}

// An unreachable registry is an error naming the image.
func TestUnreachableRegistry(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	host := l.Addr().String()
	l.Close()
	ctx := context.Background()
	img := image(t)
	err = Write(ctx, img, must(ParseRef(host+"/tiny:v1")), Remote{Insecure: true})
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), "image "+host+"/tiny:v1: linux/amd64: pushing the image:")
	assert.Contains(t, err.Error(), "cannot reach the registry "+host)
	assert.Contains(t, err.Error(), "connection refused")
}

// A registry that closes the connection in the middle of a layer's
// upload fails the push, naming the image and platform, and leaves the
// tag where it was: on nothing.
func TestPushCutShortLeavesNoTag(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := startRegistry(t, registryOptions{})
	proxy := cutProxy(t, reg.Host, 256<<10)
	ctx := context.Background()
	img := index(t)
	rm := Remote{Insecure: true}
	err := Write(ctx, img, must(ParseRef(proxy+"/tiny:edge")), rm)
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), "image "+proxy+"/tiny:edge: linux/amd64: pushing the image: the connection to the registry "+proxy+" broke")

	repo, err := rm.repository(must(ParseRef(reg.Host + "/tiny:edge")))
	require.NoError(t, err)
	_, err = repo.Resolve(ctx, "edge")
	assert.True(t, errors.Is(err, errdef.ErrNotFound), "the tag: %v", err)
}

// cutProxy forwards connections to host, and closes each once it has
// passed limit bytes from the client.
func cutProxy(t *testing.T, host string, limit int64) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", host)
				if err != nil {
					return
				}
				defer s.Close()
				var passed atomic.Int64
				go func() {
					io.Copy(c, s)
					c.Close()
				}()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if passed.Add(int64(n)) > limit {
							return
						}
						if _, err := s.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// A push deletes nothing: without the referrers API, oras links an SBOM
// through the tag sha256-<its subject's digest>, and deleted the manifest
// that tag named before, whoever had tagged it so. Anyone who may push
// could have had a build delete the production index with the builder's
// credentials.
func TestPushDeletesNothing(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := startRegistry(t, registryOptions{})
	// The registry, without its referrers API, as many are.
	target, err := url.Parse("http://" + reg.Host)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		r.Header.Del("OCI-Subject") // it would say that the API is there
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/referrers/") {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	rm := Remote{Insecure: true}
	prodOpts := options(platforms(t))
	prodOpts.Created = time.Unix(1, 0) // another image, an index too
	prod, err := Build(ctx, prodOpts)
	require.NoError(t, err)
	require.Equal(t, ocispec.MediaTypeImageIndex, prod.Root.MediaType)
	prodRef := must(ParseRef(host + "/team/tiny:prod"))
	require.NoError(t, Write(ctx, prod, prodRef, rm))

	img := index(t)
	repo, err := rm.repository(prodRef)
	require.NoError(t, err)
	for _, p := range img.Platforms {
		require.NoError(t, repo.Tag(ctx, prod.Root, "sha256-"+p.Manifest.Digest.Encoded()))
	}
	require.NoError(t, Write(ctx, img, must(ParseRef(host+"/team/tiny:edge")), rm))
	_, err = repo.Resolve(ctx, prod.Root.Digest.String())
	require.NoError(t, err, "the manifest the tag named is still there")
	_, err = repo.Resolve(ctx, "prod")
	require.NoError(t, err)
}
