package ociimage

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A registry that answers plain HTTP to an HTTPS request: on loopback the
// message says to add -insecure, elsewhere why plain HTTP is refused.
func TestExplainPlainHTTPRegistry(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	resp, err := srv.Client().Get("https://" + strings.TrimPrefix(srv.URL, "http://") + "/v2/")
	if resp != nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, http.ErrSchemeMismatch)

	loopback := explain(err, "127.0.0.1:5000")
	assert.ErrorIs(t, loopback, http.ErrSchemeMismatch)
	assert.Contains(t, loopback.Error(), "the registry 127.0.0.1:5000 answers plain HTTP, not HTTPS; it is on this machine's loopback, so add -insecure")

	remote := explain(err, "registry.example.com")
	assert.ErrorIs(t, remote, http.ErrSchemeMismatch)
	assert.Contains(t, remote.Error(), "the registry registry.example.com answers plain HTTP, not HTTPS; serve it over HTTPS: -insecure is refused for a registry off this machine's loopback")
	assert.NotContains(t, remote.Error(), "add -insecure")
}

// Pushing to a loopback registry that answers plain HTTP, without
// -insecure, says to add it.
func TestPushToPlainHTTPSuggestsInsecure(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := t.Context()
	img := image(t)
	err := Write(ctx, img, must(ParseRef(host+"/tiny:v1")), Remote{})
	require.ErrorIs(t, err, http.ErrSchemeMismatch)
	assert.Contains(t, err.Error(), "add -insecure")
}
