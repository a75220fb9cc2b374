package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// startServe builds kvserver and runs it in serve mode on a free port,
// returning its base URL and the process.
func startServe(t *testing.T, config string) (string, *exec.Cmd, *syncBuffer) {
	t.Helper()
	stdout, cmd, stderr := startKVServer(t, "-kv-transfer-config", config, "-listen", "127.0.0.1:0", "serve")
	line, err := stdout.ReadString('\n')
	require.NoError(t, err, "stderr: %s", stderr.String())
	m := regexp.MustCompile(`on (http://\S+)`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	return m[1], cmd, stderr
}

// startKVServer builds kvserver and runs it with args, returning its
// standard output to read, the process and its standard error.
func startKVServer(t *testing.T, args ...string) (*bufio.Reader, *exec.Cmd, *syncBuffer) {
	t.Helper()
	// Built as kvgen build compiles: the build cache then holds what this
	// build needs from the deployment builds' tests, and the other way
	// round.
	bin := kvgentest.Program(t, ".")
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return bufio.NewReader(stdout), cmd, stderr
}

// syncBuffer is the process's stderr, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// scrapes is the client of metric. Its connections close after each
// scrape: a pool's spare connection, dialed and never used, would hold a
// server's stop for 5 s (net/http waits that long for a connection to send
// its first request).
var scrapes = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// metric returns the value of the series of /metrics that starts with
// name (with its labels), or -1 if there is none.
func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	resp, err := scrapes.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return -1
}

// post runs a step and decodes its report into report.
func post(t *testing.T, base, step, body string, report any) {
	t.Helper()
	resp, err := http.Post(base+"/"+step, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(report))
}

// An operator scrapes /metrics during a prefill/decode handoff and sees the
// counts move; a router following /events sees the stored prefix; SIGTERM
// answers the request in flight before the process exits.
func TestServeHandoffMetricsEventsAndDrain(t *testing.T) {
	base, cmd, stderr := startServe(t, `{"kv_connector":"memory"}`)
	lbl := `{connector="memory"}`

	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	// No scrape before the handoff: what is counted does not wait for one.

	// A router follows the events.
	follow, err := http.Get(base + "/events")
	require.NoError(t, err)
	defer follow.Body.Close()
	events := make(chan map[string]any, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(follow.Body)
		for sc.Scan() {
			var e map[string]any
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				events <- e
			}
		}
	}()

	var p prefillReport
	post(t, base, "prefill", `{"prompt":"a shared system prompt","tokens":100}`, &p)
	assert.Equal(t, 96, p.Saved)
	layerBytes := float64(96 * kvBytesPerToken)
	assert.Equal(t, 4*layerBytes, metric(t, base, "kvgen_connector_saved_bytes_total"+lbl), "four layers of 96 tokens saved")
	assert.Zero(t, metric(t, base, "kvgen_connector_load_hits_total"+lbl))

	var d decodeReport
	post(t, base, "decode", `{"prompt":"a shared system prompt","tokens":100}`, &d)
	assert.Equal(t, 96, d.Loaded)
	assert.Equal(t, 4.0, metric(t, base, "kvgen_connector_load_hits_total"+lbl))
	assert.Equal(t, 4*layerBytes, metric(t, base, "kvgen_connector_loaded_bytes_total"+lbl))
	assert.Equal(t, 4.0, metric(t, base, "kvgen_connector_load_duration_seconds_count"+lbl))
	assert.Equal(t, 96.0, metric(t, base, `kvserver_prompt_tokens_total{source="loaded"}`))
	assert.Equal(t, 1.0, metric(t, base, `kvserver_steps_total{outcome="ok",step="decode"}`))

	select {
	case e := <-events:
		assert.Equal(t, "BlockStored", e["type"])
		assert.Len(t, e["block_hashes"], 6, "96 tokens in blocks of 16")
		assert.Len(t, e["token_ids"], 96)
		assert.Equal(t, 16.0, e["block_size"])
		assert.Equal(t, "CPU", e["medium"])
		assert.Nil(t, e["lora_name"])
	case <-time.After(10 * time.Second):
		t.Fatal("the follower saw no event")
	}

	// Hostile requests are refused before any work: a body over 1 MiB, a
	// prompt of more tokens than a step takes, or none, a key the request
	// has not, a second object after the first.
	for body, want := range map[string]string{
		`{"prompt":"` + strings.Repeat("x", 1<<20) + `"}`: "request body too large",
		`{"tokens":2097152}`:                              "tokens: want from 1 to 1048576",
		`{"prompt":"p","tokenz":1}`:                       `unknown field "tokenz"`,
		`{"prompt":"p","tokens":1}`:                       "has no full block",
		`{"tokens":0}`:                                    "tokens: want from 1 to 1048576",
		`{"tokens":1}{"tokens":1048576}`:                  "want one JSON object, with nothing after it",
	} {
		resp, err := http.Post(base+"/prefill", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%.80s", body)
		assert.Contains(t, string(msg), want)
	}
	assert.Equal(t, 6.0, metric(t, base, `kvserver_steps_total{outcome="bad_request",step="prefill"}`))

	// A decode whose body is still on its way when SIGTERM arrives is
	// answered; then the process exits 0.
	pr, pw := io.Pipe()
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(base+"/decode", "application/json", pr)
		if err != nil {
			close(answered)
			return
		}
		answered <- resp
	}()
	_, err = io.WriteString(pw, `{"prompt":"a shared system prompt",`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return metric(t, base, "kvserver_requests_in_flight") == 1 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	// The events stream ends with the shutdown, and new connections are
	// refused.
	require.Eventually(t, func() bool {
		_, err := http.Get(base + "/healthz")
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
	_, err = io.WriteString(pw, `"tokens":100}`)
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	resp, ok := <-answered
	require.True(t, ok, "the request in flight was answered")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
	resp.Body.Close()
	assert.Equal(t, 96, d.Loaded)
	for range events { // drained: the stream ended
	}
	err = cmd.Wait()
	require.NoError(t, err, "stderr: %s", stderr)
	assert.Equal(t, 0, cmd.ProcessState.ExitCode())
	// The log says that it drained, what, and that it stopped.
	assert.Contains(t, stderr.String(), "kvserver: stopping: draining 1 request in flight (at most 30s)\n")
	assert.Regexp(t, `kvserver: stopped after \S+: the 1 request in flight drained\n`, stderr.String())
}

// With events bound to port 0, serve says where they went: the addresses
// it prints are the ones bound, and a subscriber reaches them. (By vLLM's
// rule an endpoint binds only with "*" or "::"; replay always binds.)
func TestServePrintsEventAddresses(t *testing.T) {
	r, _, stderr := startKVServer(t, "-kv-transfer-config", `{"kv_connector":"memory","kv_role":"kv_both"}`,
		"-kv-events-config", `{"enable_kv_cache_events":true,"endpoint":"tcp://*:0","replay_endpoint":"tcp://127.0.0.1:0"}`,
		"-listen", "127.0.0.1:0", "serve")
	for _, what := range []string{"serving", "published", "replayed"} {
		line, err := r.ReadString('\n')
		require.NoError(t, err, "stderr: %s", stderr.String())
		if what == "serving" {
			continue
		}
		m := regexp.MustCompile(`^kvserver: kv events ` + what + ` on tcp://(127\.0\.0\.1|\[::\]|0\.0\.0\.0):([1-9]\d*)\n$`).FindStringSubmatch(line)
		require.NotNil(t, m, "%q", line)
		c, err := net.Dial("tcp", "127.0.0.1:"+m[2])
		require.NoError(t, err, "%s", line)
		c.Close()
	}
}
