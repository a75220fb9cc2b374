//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/external/kvevents/kveventstest"
	"github.com/kvgen/kvgen/registry/kv"
)

// zmqEvent is one event of a batch, as the subscriber decodes it.
type zmqEvent struct {
	Type        string   `json:"type"`
	BlockHashes []uint64 `json:"block_hashes"`
	Parent      *uint64  `json:"parent_block_hash"`
	TokenIDs    []uint32 `json:"token_ids"`
	BlockSize   int      `json:"block_size"`
	Medium      *string  `json:"medium"`
}

// A router reads a kvserver's KV events through libzmq as it reads a vLLM
// engine's: kvserver connects to the router's bound SUB socket, as vLLM
// does to an endpoint without "*", under the topic kv@<pod>@<model>. A
// dozen 256-token prefills overflow a small memory store; the batches
// decode as vLLM's msgspec decoder decodes them, in both encodings; the
// index replayed from them is what the store can still load; a replay
// from sequence 0 is the live payloads byte for byte (subscriber.py
// checks both); and /metrics counts what was published, the subscriber
// and the replay.
func TestKVEventsOnVLLMsWire(t *testing.T) {
	py := kveventstest.Python(t)
	for _, encoding := range []string{"maps", "arrays"} {
		t.Run(encoding, func(t *testing.T) { testKVEventsOnVLLMsWire(t, py, encoding) })
	}
}

func testKVEventsOnVLLMsWire(t *testing.T, py, encoding string) {
	const topic = "kv@pod-a@demo"
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	replay := "tcp://" + freePort(t)
	script := filepath.Join("..", "external", "kvevents", "testdata", "subscriber.py")
	cmd := exec.CommandContext(ctx, py, script, "--bind", "--encoding", encoding, "tcp://127.0.0.1:*", replay, topic, "-")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{})
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	line := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				<-exited
				t.Fatalf("the subscriber ended before %s: %v: %s", what, waitErr, stderr)
			}
			return l
		case <-time.After(60 * time.Second):
			t.Fatalf("no %s from the subscriber: %s", what, stderr)
			return ""
		}
	}
	endpoint, ok := strings.CutPrefix(line("ready"), "ready ")
	require.True(t, ok, "want ready and the endpoint bound")

	store := "kv-events-" + encoding
	config := `{"kv_connector":"memory","kv_role":"kv_both","kv_connector_extra_config":{"capacity_bytes":500000,"store":"` + store + `"}}`
	events := fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":%q,"replay_endpoint":%q,"topic":%q}`, endpoint, replay, topic)
	s := serveInProcess(t, Registry, "-kv-transfer-config", config, "-kv-events-config", events, "-kv-events-encoding", encoding)
	// A batch published before the subscription arrives would not reach
	// the subscriber: wait for it, not only for the connection.
	require.Eventually(t, func() bool { return metric(t, s.base, "kvserver_kv_events_subscribed") == 1 }, 20*time.Second, 10*time.Millisecond,
		"kvserver connects to the subscriber, which subscribes: %s", s.errs)

	sched, prefixes := storeView(t, config)

	shared := "you are a helpful assistant who answers in short plain words and never guesses at facts"
	var stored []*kv.Request
	for i := range 12 {
		p := fmt.Sprintf("%s question-%d", shared, i)
		var r prefillReport
		post(t, s.base, "prefill", fmt.Sprintf(`{"prompt":%q,"tokens":256}`, p), &r)
		require.Equal(t, 240, r.Saved)
		stored = append(stored, &kv.Request{ID: fmt.Sprint(i), PromptTokens: tokenize(p, 256)[:240]})
	}

	// The memory connector reports under its lock, before a prefill is
	// answered: every batch has its sequence number now. Once as many
	// are published (none dropped, below), all are.
	sequenced := metric(t, s.base, "kvserver_kv_events_sequenced_total")
	require.Positive(t, sequenced)
	n := sequenced
	require.Eventually(t, func() bool {
		return metric(t, s.base, "kvserver_kv_events_published_total")+metric(t, s.base, "kvserver_kv_events_dropped_total") == sequenced
	},
		20*time.Second, 10*time.Millisecond)
	assert.Zero(t, metric(t, s.base, "kvserver_kv_events_dropped_total"))
	assert.Zero(t, metric(t, s.base, "kvserver_kv_events_subscriber_dropped_total"))
	assert.Equal(t, 1.0, metric(t, s.base, "kvserver_kv_events_subscribers"))
	_, err = fmt.Fprintf(stdin, "%d\n", int(n))
	require.NoError(t, err)

	var batches [][]zmqEvent
	require.NoError(t, json.Unmarshal([]byte(line("the events")), &batches))
	select {
	case <-exited:
		require.NoError(t, waitErr, "the subscriber: %s", stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("the subscriber did not end: %s", stderr)
	}
	require.Len(t, batches, int(n))
	assert.Equal(t, n, metric(t, s.base, "kvserver_kv_events_published_total"), "nothing was published after the count")
	assert.Equal(t, 1.0, metric(t, s.base, "kvserver_kv_events_replays_total"))

	index := blockIndex[uint64]{}
	removed := 0
	// Events the publisher had not yet taken share a batch, in order.
	for _, batch := range batches {
		require.NotEmpty(t, batch, "a batch holds events")
		for _, e := range batch {
			index.apply(t, e.Type, e.Parent, e.BlockHashes, len(e.TokenIDs), e.BlockSize)
			if e.Type == "BlockRemoved" {
				removed++
			}
			if e.Type != "AllBlocksCleared" && assert.NotNil(t, e.Medium) {
				assert.Equal(t, "CPU", *e.Medium)
			}
		}
	}
	require.NotZero(t, removed, "a dozen prefills overflow the store")

	loads := loadable(t, sched, prefixes, stored, kv.BlockHash.Uint64)
	assert.NotEmpty(t, loads)
	assert.True(t, maps.Equal(loads, index), "the index replayed from the events (%d blocks) is what loads (%d blocks)", len(index), len(loads))
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// -kv-events-config and -kv-events-encoding are checked in every mode
// before anything runs: a bad one is a usage error that names the flag.
func TestKVEventsFlagsAreChecked(t *testing.T) {
	for _, mode := range modeNames() {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"-kv-events-config", `{"enable_kv_cache_events":true,"endpoit":"tcp://*:5557"}`}, `kvserver: -kv-events-config: unknown key "endpoit"`},
			{[]string{"-kv-events-config", `{"enable_kv_cache_events":true,"hwm":0}`}, "kvserver: -kv-events-config: hwm 0: want at least 1"},
			{[]string{"-kv-events-config", `not json`}, "kvserver: -kv-events-config: "},
			{[]string{"-kv-events-encoding", "array"}, `kvserver: -kv-events-encoding: kv events encoding "array": want "maps" or "arrays"`},
		} {
			code, out, stderr := runServer(t, append(c.args, mode)...)
			assert.Equal(t, 2, code, "%s %q: %s", mode, c.args, stderr)
			assert.Empty(t, out)
			assert.True(t, strings.HasPrefix(stderr, c.want), "%s %q: %s", mode, c.args, stderr)
		}
	}
}

// Without events, serve publishes nothing and /metrics has no series of
// them; a config that does not enable them is the same.
func TestKVEventsOffByDefault(t *testing.T) {
	memory := []string{"-kv-transfer-config", `{"kv_connector":"memory","kv_connector_extra_config":{"store":"kv-events-off"}}`}
	for _, args := range [][]string{memory, append(memory, "-kv-events-config", `{"enable_kv_cache_events":false,"endpoint":"tcp://*:5557"}`)} {
		s := serveInProcess(t, Registry, args...)
		assert.Equal(t, -1.0, metric(t, s.base, "kvserver_kv_events_published_total"), "%q", args)
		assert.Equal(t, -1.0, metric(t, s.base, "kvserver_kv_events_subscribers"), "%q", args)
	}
}
