package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
	"github.com/kvgen/kvgen/internal/testenv"
)

// TestGateway builds the gateway with go build, as a user does after go
// generate, and sends requests through a chain of all three plugins: the
// one in a module of its own included.
func TestGateway(t *testing.T) {
	dir := t.TempDir()
	bin := kvgentest.Program(t, ".")
	cfg := filepath.Join(dir, "gateway.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"chain": [
		{"plugin": "cors", "config": {"origins": ["https://app.example"]}},
		{"plugin": "bearer", "config": {"tokens": ["s3cret"]}},
		{"plugin": "headers", "config": {"X-Gateway": "kvgen"}}
	]}`), 0o644))
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"-config", cfg}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}

	got := run("-request", "/hello", "-header", "Authorization: Bearer s3cret", "-header", "Origin: https://app.example")
	assert.Equal(t, "200 OK\nAccess-Control-Allow-Origin: https://app.example\nContent-Type: text/plain; charset=utf-8\nVary: Origin\nX-Gateway: kvgen\n\nhello from /hello\n", got)

	got = run("-request", "/hello", "-header", "Authorization: Bearer wrong")
	assert.True(t, strings.HasPrefix(got, "401 Unauthorized\n"), got)
	assert.NotContains(t, got, "hello from", "auth stops the chain")

	got = run("-request", "/hello", "-method", "OPTIONS", "-header", "Origin: https://app.example", "-header", "Access-Control-Request-Method: POST")
	assert.True(t, strings.HasPrefix(got, "204 No Content\n"), "cors answers the preflight before auth: %s", got)

	out, err := exec.Command(bin, "-list-plugins").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "cors\tgithub.com/kvgen/kvgen/examples/gateway/cors.New\tgithub.com/kvgen/kvgen/examples/gateway/cors v0.1.0 => ./cors\n")
}

// A plugin the binary does not link fails at start-up, naming the nearest.
func TestGatewayUnknownPlugin(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"chain": [{"plugin": "header"}]}`), 0o644))
	cmd := exec.Command("go", "run", "-trimpath", "-buildvcs=false", ".", "-config", cfg, "-request", "/")
	cmd.Env = append(os.Environ(), testenv.Static()...)
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `gateway: `+cfg+`: step 1: unknown plugin "header" (did you mean "headers" or "bearer"?); linked: auth, cors, headers`)
}

// With -listen 127.0.0.1:0 the gateway says which port it got, and serves
// there.
func TestServeSaysWhere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- serve(ln, http.HandlerFunc(backend), w) }()
	line, err := bufio.NewReader(r).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "gateway: serving on http://"+ln.Addr().String()+"\n", line)
	resp, err := http.Get(strings.TrimSpace(strings.TrimPrefix(line, "gateway: serving on ")) + "/hi")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, "hello from /hi\n", string(body))
	ln.Close()
	assert.Error(t, <-done)
}
