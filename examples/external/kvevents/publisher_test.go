package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
	"github.com/vmihailenco/msgpack/v5"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(readerEnv); addr != "" {
		os.Exit(runReader(addr))
	}
	defaultEndpoint = "tcp://127.0.0.1:0"
	os.Exit(m.Run())
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// start runs a publisher on loopback port 0 with cfg's changes applied.
func start(t testing.TB, change func(*Config), opts Options) *Publisher {
	t.Helper()
	cfg := DefaultConfig()
	cfg.EnableKVCacheEvents, cfg.Publisher = true, "zmq"
	if change != nil {
		change(&cfg)
	}
	if opts.Logger == nil {
		opts.Logger = quietLog
	}
	p, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// waitPrefixes waits until the publisher's subscribers hold n
// subscriptions in all, so that what is published next reaches them.
func waitPrefixes(t testing.TB, p *Publisher, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := 0
		eachSubscriber(p, func(s *subscriber) { got += len(s.prefixes) })
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// eachSubscriber calls f with each subscriber, locked.
func eachSubscriber(p *Publisher, f func(*subscriber)) {
	p.subsMu.Lock()
	defer p.subsMu.Unlock()
	for s := range p.subs {
		s.mu.Lock()
		f(s)
		s.mu.Unlock()
	}
}

func hash(n uint64) kv.BlockHash {
	var h kv.BlockHash
	binary.BigEndian.PutUint64(h[len(h)-8:], n)
	return h
}

// sample returns one event of each kind; the stored event's hashes are
// small numbers, which must still go out as uint64.
func sample() []kv.KVEvent {
	parent := hash(7)
	return []kv.KVEvent{
		{Kind: kv.BlockStored, BlockHashes: []kv.BlockHash{hash(5), hash(1 << 63)}, ParentBlockHash: &parent,
			TokenIDs: []uint32{1, 2, 3, 4, 5, 6}, BlockSize: 2, Medium: kv.MediumCPU},
		{Kind: kv.BlockStored, BlockHashes: []kv.BlockHash{hash(9)}, TokenIDs: []uint32{70000, 2}, BlockSize: 2},
		{Kind: kv.BlockRemoved, BlockHashes: []kv.BlockHash{hash(5)}, Medium: kv.MediumDisk},
		{Kind: kv.AllBlocksCleared},
	}
}

// wantMaps is sample() as vLLM's map-tagged events decode.
var wantMaps = []any{
	map[string]any{"type": "BlockStored", "block_hashes": []any{uint64(5), uint64(1 << 63)},
		"parent_block_hash": uint64(7), "token_ids": []any{int8(3), int8(4), int8(5), int8(6)},
		"block_size": int8(2), "lora_id": nil, "medium": "CPU", "lora_name": nil},
	map[string]any{"type": "BlockStored", "block_hashes": []any{uint64(9)},
		"parent_block_hash": nil, "token_ids": []any{uint32(70000), int8(2)},
		"block_size": int8(2), "lora_id": nil, "medium": nil, "lora_name": nil},
	map[string]any{"type": "BlockRemoved", "block_hashes": []any{uint64(5)}, "medium": "DISK"},
	map[string]any{"type": "AllBlocksCleared"},
}

// wantArrays is sample() as vLLM's older array-tagged events decode.
var wantArrays = []any{
	[]any{"BlockStored", []any{uint64(5), uint64(1 << 63)}, uint64(7),
		[]any{int8(3), int8(4), int8(5), int8(6)}, int8(2), nil, "CPU", nil},
	[]any{"BlockStored", []any{uint64(9)}, nil, []any{uint32(70000), int8(2)}, int8(2), nil, nil, nil},
	[]any{"BlockRemoved", []any{uint64(5)}, "DISK"},
	[]any{"AllBlocksCleared"},
}

// decode reads a payload: msgpack's generic decoding keeps each
// integer's wire width (uint64 only from 0xcf), so the comparisons
// check the encoding too.
func decode(t *testing.T, payload []byte) []any {
	t.Helper()
	var v any
	if err := msgpack.Unmarshal(payload, &v); err != nil {
		t.Fatal(err)
	}
	b, ok := v.([]any)
	if !ok || len(b) != 3 {
		t.Fatalf("batch %#v: want [ts, events, rank]", v)
	}
	if ts, ok := b[0].(float64); !ok || time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Fatalf("ts %#v", b[0])
	}
	return b
}

func TestPublishFramesSeqAndEncodings(t *testing.T) {
	for _, tc := range []struct {
		enc  Encoding
		want []any
	}{{Maps, wantMaps}, {Arrays, wantArrays}} {
		t.Run(tc.enc.String(), func(t *testing.T) {
			p := start(t, func(c *Config) { c.Topic = "kv-events" }, Options{Encoding: tc.enc, DataParallelRank: 3})
			sub := dialPeer(t, p.PubAddr(), "SUB")
			sub.subscribe("kv-events")
			waitPrefixes(t, p, 1)
			p.Publish(sample())
			p.Emit(kv.KVEvent{Kind: kv.AllBlocksCleared})
			for seq := uint64(0); seq < 2; seq++ {
				m := sub.msg()
				if len(m) != 3 || string(m[0]) != "kv-events" || len(m[1]) != 8 || binary.BigEndian.Uint64(m[1]) != seq {
					t.Fatalf("message %d: %q", seq, m)
				}
				b := decode(t, m[2])
				if b[2] != int8(3) {
					t.Errorf("data_parallel_rank %#v, want 3", b[2])
				}
				want := tc.want
				if seq == 1 {
					want = tc.want[3:]
				}
				if !reflect.DeepEqual(b[1], want) {
					t.Errorf("events\n got %#v\nwant %#v", b[1], want)
				}
			}
			if st := p.Stats(); st.Published != 2 || st.Subscribers != 1 || st.Dropped != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestTopicFiltering(t *testing.T) {
	p := start(t, func(c *Config) { c.Topic = "kv-events" }, Options{})
	prefix := dialPeer(t, p.PubAddr(), "SUB")
	prefix.subscribe("kv")
	other := dialPeer(t, p.PubAddr(), "SUB")
	other.subscribe("other")
	all := dialPeer(t, p.PubAddr(), "XSUB")
	all.send([]byte{1}) // ZMTP 3.0: subscribe to everything
	none := dialPeer(t, p.PubAddr(), "SUB")
	waitPrefixes(t, p, 3)

	p.Emit(kv.KVEvent{Kind: kv.AllBlocksCleared})
	for _, s := range []*peer{prefix, all} {
		if m := s.msg(); string(m[0]) != "kv-events" || binary.BigEndian.Uint64(m[1]) != 0 {
			t.Fatalf("%q", m)
		}
	}
	if !other.quiet(200*time.Millisecond) || !none.quiet(10*time.Millisecond) {
		t.Fatal("a peer that did not subscribe to the topic got a message")
	}

	prefix.cancel("kv")
	all.send([]byte{0})
	waitPrefixes(t, p, 1)
	p.Emit(kv.KVEvent{Kind: kv.AllBlocksCleared})
	if !prefix.quiet(200*time.Millisecond) || !all.quiet(10*time.Millisecond) {
		t.Fatal("a peer got a message after cancelling its subscription")
	}
}

func TestReplayEqualsLive(t *testing.T) {
	p := start(t, func(c *Config) {
		c.ReplayEndpoint = "tcp://127.0.0.1:0"
		c.BufferSteps = 4
	}, Options{})
	sub := dialPeer(t, p.PubAddr(), "SUB")
	sub.subscribe("")
	waitPrefixes(t, p, 1)
	var live [][][]byte // each live message's frames: topic, seq, payload
	for i := range 6 {
		p.Publish(sample()[:1+i%4])
		live = append(live, sub.msg())
	}
	dealer := dialPeer(t, p.ReplayAddr(), "DEALER")
	for _, tc := range []struct{ from, first uint64 }{{0, 2}, {4, 4}, {6, 6}} {
		dealer.send(nil, binary.BigEndian.AppendUint64(nil, tc.from))
		for seq := tc.first; seq < 6; seq++ {
			// vLLM's layout since v0.26.0: the delimiter, then the live
			// message's frames byte for byte.
			m := dealer.msg()
			if len(m) != 4 || len(m[0]) != 0 || binary.BigEndian.Uint64(m[2]) != seq ||
				!bytes.Equal(m[1], live[seq][0]) || !bytes.Equal(m[2], live[seq][1]) || !bytes.Equal(m[3], live[seq][2]) {
				t.Fatalf("replay from %d: batch %d: %q", tc.from, seq, m)
			}
		}
		end := dealer.msg()
		if len(end) != 4 || len(end[0]) != 0 || len(end[1]) != 0 || !bytes.Equal(end[2], bytes.Repeat([]byte{0xFF}, 8)) || len(end[3]) != 0 {
			t.Fatalf("end marker %q", end)
		}
	}
	// A malformed request is ignored; the connection still serves.
	dealer.send(nil, []byte{1, 2})
	dealer.send(nil, make([]byte, 8))
	if m := dealer.msg(); len(m) != 4 || binary.BigEndian.Uint64(m[2]) != 2 {
		t.Fatalf("%q", m)
	}
	if st := p.Stats(); st.Replays != 4 {
		t.Errorf("replays %d, want 4", st.Replays)
	}
}

// A subscriber that never reads costs its own queue, bounded by hwm, and
// then its connection; it never slows Publish or another subscriber.
func TestStalledSubscriber(t *testing.T) {
	const hwm = 8
	p := start(t, func(c *Config) { c.HWM = hwm }, Options{WriteTimeout: 300 * time.Millisecond})
	stalled := dialPeer(t, p.PubAddr(), "SUB")
	// Small socket buffers: the kernel's autotuning could otherwise take
	// megabytes for a peer that never reads, which is progress to the
	// writer, and the stream would end before they filled.
	stalled.c.(*net.TCPConn).SetReadBuffer(4 << 10)
	stalled.subscribe("")
	reader := dialPeer(t, p.PubAddr(), "SUB")
	reader.subscribe("")
	waitPrefixes(t, p, 2)
	shrinkSendBuffers(t, p)

	big := sample()[:1]
	big[0].TokenIDs = make([]uint32, 1<<15)
	big[0].BlockSize = 1 << 14
	const n = 300 // about 300 × 33 KB, far past the socket buffers
	maxQueued := 0
	begin := time.Now()
	for seq := range uint64(n) {
		p.Publish(big)
		if m := reader.msg(); binary.BigEndian.Uint64(m[1]) != seq {
			t.Fatalf("reader got seq %d, want %d", binary.BigEndian.Uint64(m[1]), seq)
		}
		eachSubscriber(p, func(s *subscriber) { maxQueued = max(maxQueued, len(s.q)) })
	}
	if d := time.Since(begin); d > 20*time.Second {
		t.Errorf("%d batches took %v", n, d)
	}
	if maxQueued > hwm {
		t.Errorf("a queue held %d batches, hwm %d", maxQueued, hwm)
	}
	// Nothing reads the stalled connection, so the writer's deadline
	// passes and the publisher hangs up on it.
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Subscribers != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := p.Stats().Subscribers; got != 1 {
		t.Fatalf("%d subscribers, want 1", got)
	}
	if !closed(stalled.c, 5*time.Second) {
		t.Error("the stalled subscriber was not disconnected")
	}
	if st := p.Stats(); st.SubscriberDrops == 0 || st.Published != n || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
}

// socket is one of a publisher's sockets, and the type of a peer of it.
type socket struct {
	name string
	addr net.Addr
	typ  string
}

// sockets returns the PUB and the replay socket of p.
func sockets(p *Publisher) []socket {
	return []socket{{"subscriber", p.PubAddr(), "SUB"}, {"replay", p.ReplayAddr(), "DEALER"}}
}

// A peer declaring a 4 GiB frame is cut before anything is allocated.
func TestHugeFrameCut(t *testing.T) {
	p := start(t, func(c *Config) { c.ReplayEndpoint = "tcp://127.0.0.1:0" }, Options{})
	huge := []byte{0x02, 0, 0, 0, 1, 0, 0, 0, 0} // long frame, 1<<32 bytes
	for _, tc := range sockets(p) {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			c := dialPeer(t, tc.addr, tc.typ)
			c.write(huge)
			if !closed(c.c, 5*time.Second) {
				t.Fatal("connection not cut")
			}
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
				t.Errorf("%d bytes allocated", d)
			}
		})
	}
}

func TestBadGreetingsRefused(t *testing.T) {
	p := start(t, nil, Options{HandshakeTimeout: 500 * time.Millisecond})
	g := func(edit func([]byte)) []byte {
		b := g31()
		edit(b)
		return b
	}
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + string(make([]byte, 40)))},
		{"zmtp 2", g(func(b []byte) { b[10] = 1 })},
		{"curve", g(func(b []byte) { copy(b[12:32], "CURVE\x00") })},
		{"push socket", append(g(func([]byte) {}), readyCmd("PUSH")...)},
		{"message before ready", append(g(func([]byte) {}), 0x00, 0x01, 0x01)},
		{"reserved flags", append(g(func([]byte) {}), 0x80, 0x00)},
		{"huge ready", append(g(func([]byte) {}), 0x06, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)},
		{"silent", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := p.Stats().Refused
			c, err := net.Dial("tcp", p.PubAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(tc.send)
			if !closed(c, 5*time.Second) {
				t.Fatal("not refused")
			}
			deadline := time.Now().Add(time.Second)
			for p.Stats().Refused == before && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if p.Stats().Refused != before+1 {
				t.Errorf("refused %d, want %d", p.Stats().Refused, before+1)
			}
		})
	}
}

func TestMaxSubscribers(t *testing.T) {
	p := start(t, nil, Options{MaxSubscribers: 1})
	dialPeer(t, p.PubAddr(), "SUB")
	c, err := net.Dial("tcp", p.PubAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !closed(c, 5*time.Second) {
		t.Fatal("a connection past MaxSubscribers was kept")
	}
}

// With an endpoint that names a host, the publisher connects to a bound
// SUB socket, as vLLM does, and again after the connection drops.
func TestConnectsOut(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := start(t, func(c *Config) { c.Endpoint = "tcp://" + l.Addr().String() }, Options{})
	if p.PubAddr() != nil {
		t.Fatal("a connecting publisher reports a bound address")
	}
	for round := range 2 {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		sub := newPeer(t, c)
		sub.write(g31())
		sub.write(readyCmd("SUB"))
		sub.read(64)
		sub.frame()
		sub.subscribe("")
		waitPrefixes(t, p, 1)
		p.Emit(kv.KVEvent{Kind: kv.AllBlocksCleared})
		if m := sub.msg(); binary.BigEndian.Uint64(m[1]) != uint64(round) {
			t.Fatalf("round %d: %q", round, m)
		}
		c.Close()
		waitPrefixes(t, p, 0)
	}
}

func g31() []byte {
	b := make([]byte, 64)
	b[0], b[9], b[10], b[11] = 0xFF, 0x7F, 3, 1
	copy(b[12:], "NULL")
	return b
}

func readyCmd(typ string) []byte {
	body := append([]byte("\x05READY\x0bSocket-Type"), 0, 0, 0, byte(len(typ)))
	body = append(body, typ...)
	return append([]byte{0x04, byte(len(body))}, body...)
}

func TestCloseFlushesAndDropsAfter(t *testing.T) {
	p := start(t, nil, Options{})
	sub := dialPeer(t, p.PubAddr(), "SUB")
	sub.subscribe("")
	waitPrefixes(t, p, 1)
	for range 50 {
		p.Publish(sample())
	}
	p.Close()
	for seq := range uint64(50) {
		if m := sub.msg(); binary.BigEndian.Uint64(m[1]) != seq {
			t.Fatalf("got seq %d, want %d", binary.BigEndian.Uint64(m[1]), seq)
		}
	}
	if !closed(sub.c, 5*time.Second) {
		t.Fatal("connection open after Close")
	}
	p.Emit(kv.KVEvent{Kind: kv.AllBlocksCleared})
	if st := p.Stats(); st.Published != 50 || st.Dropped != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestNewDisabled(t *testing.T) {
	if _, err := New(context.Background(), DefaultConfig(), Options{}); err != ErrDisabled {
		t.Fatalf("got %v, want ErrDisabled", err)
	}
}

// A context already done when New is called closes the publisher as
// soon as it is made, as a later cancel would.
func TestNewWithDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := DefaultConfig()
	cfg.EnableKVCacheEvents, cfg.Publisher = true, "zmq"
	p, err := New(ctx, cfg, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.Publish(sample()[:1])
		if p.Stats().Dropped > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the publisher did not close: %+v", p.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	p.Close()
}

// An ipc endpoint whose socket file a live process listens on is that
// process's: New refuses it and leaves the file. One whose process is
// gone is taken over, as ZeroMQ takes it over.
func TestIPCEndpointInUse(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("ipc endpoints are Unix sockets")
	}
	path := filepath.Join(t.TempDir(), "kv.sock")
	live, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.EnableKVCacheEvents, cfg.Publisher, cfg.Endpoint = true, "zmq", "ipc://"+path
	if _, err := New(context.Background(), cfg, Options{Logger: quietLog}); err == nil || !strings.Contains(err.Error(), "another process listens on it") {
		t.Fatalf("New on a live socket: %v", err)
	}
	if c, err := net.Dial("unix", path); err != nil {
		t.Fatalf("the live socket was taken: %v", err)
	} else {
		c.Close()
	}
	live.(*net.UnixListener).SetUnlinkOnClose(false)
	live.Close() // a stale socket file stays
	p, err := New(context.Background(), cfg, Options{Logger: quietLog})
	if err != nil {
		t.Fatalf("New on a stale socket: %v", err)
	}
	p.Close()
}

// A publisher that connects says, at most once per interval, that it
// cannot reach the endpoint, rather than retrying unseen.
func TestConnectFailureIsLogged(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var logged syncBuffer
	p := start(t, func(c *Config) { c.Endpoint = "tcp://" + addr }, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logged.String(), "cannot connect to the endpoint") {
		if time.Now().After(deadline) {
			t.Fatalf("no log of the failed connection:\n%s", logged.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // several retries
	p.Close()
	if n := strings.Count(logged.String(), "cannot connect"); n != 1 {
		t.Errorf("%d lines for the retries of one interval:\n%s", n, logged.String())
	}
}
