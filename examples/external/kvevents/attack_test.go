package kvevents

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// The attacks a peer can make on the publisher's sockets, each with
// what holds. Covered elsewhere: a frame or a READY declared larger than
// MaxPeerFrame, up to 4 GiB (TestHugeFrameCut, TestBadGreetingsRefused
// "huge ready"); greetings that are not ZMTP 3.x NULL, or a socket type
// that does not talk to ours, and silence (TestBadGreetingsRefused); a
// subscriber that never reads, alone with one reader
// (TestStalledSubscriber).

// waitRefused waits until the publisher has refused n connections.
func waitRefused(t *testing.T, p *Publisher, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Refused < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := p.Stats().Refused; got != n {
		t.Fatalf("%d connections refused, want %d", got, n)
	}
}

// Attack: a peer sends a valid greeting, then its READY one byte at a
// time, each byte well within any idle timeout. Holds: HandshakeTimeout
// bounds the whole handshake, not each read, so the connection is cut
// about HandshakeTimeout after it opened, before READY is complete, and
// counted refused; on the PUB and on the replay socket.
func TestTrickledHandshakeCut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	p := start(t, func(c *Config) { c.ReplayEndpoint = "tcp://127.0.0.1:0" }, Options{HandshakeTimeout: timeout})
	refused := uint64(0)
	for _, tc := range sockets(p) {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", tc.addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			begin := time.Now()
			if _, err := c.Write(g31()); err != nil {
				t.Fatal(err)
			}
			ready := readyCmd(tc.typ)
			sent := make(chan int, 1)
			go func() {
				n := 0
				for ; n < len(ready); n++ {
					time.Sleep(timeout / 10) // the attack's pace
					if _, err := c.Write(ready[n : n+1]); err != nil {
						break
					}
				}
				sent <- n
			}()
			if !closed(c, 10*timeout) {
				t.Fatal("the trickling peer was not cut")
			}
			if d := time.Since(begin); d > 3*timeout {
				t.Errorf("cut after %v, HandshakeTimeout %v", d, timeout)
			}
			c.Close()
			if n := <-sent; n >= len(ready) {
				t.Errorf("the peer sent all %d bytes of READY before it was cut", n)
			}
			refused++
			waitRefused(t, p, refused)
		})
	}
}

// Attack: 64 peers connect at once, each completing the handshake as a
// SUB, while MaxSubscribers (4) subscribers are connected and batches are
// published. Holds: every one of the 64 is closed and counted refused;
// the 4 stay connected and get every batch in order.
func TestConnectionFlood(t *testing.T) {
	const maxSubs, flood, batches = 4, 64, 20
	p := start(t, nil, Options{MaxSubscribers: maxSubs})
	var subs []*peer
	for range maxSubs {
		s := dialPeer(t, p.PubAddr(), "SUB")
		s.subscribe("")
		subs = append(subs, s)
	}
	waitPrefixes(t, p, maxSubs)

	hello := append(g31(), readyCmd("SUB")...)
	cut := make(chan error, flood)
	for range flood {
		go func() {
			c, err := net.Dial("tcp", p.PubAddr().String())
			if err != nil {
				cut <- err
				return
			}
			defer c.Close()
			c.Write(hello) // may fail: the publisher hangs up at once
			if !closed(c, 5*time.Second) {
				cut <- fmt.Errorf("a connection past MaxSubscribers was kept")
				return
			}
			cut <- nil
		}()
	}
	for range batches {
		p.Publish(sample())
	}
	for range flood {
		if err := <-cut; err != nil {
			t.Fatal(err)
		}
	}
	waitRefused(t, p, flood)
	for seq := range uint64(batches) {
		for i, s := range subs {
			if m := s.msg(); binary.BigEndian.Uint64(m[1]) != seq {
				t.Fatalf("subscriber %d got seq %d, want %d", i, binary.BigEndian.Uint64(m[1]), seq)
			}
		}
	}
	if st := p.Stats(); st.Subscribers != maxSubs || st.Subscribed != maxSubs || st.SubscriberDrops != 0 {
		t.Errorf("stats %+v", st)
	}
}

// ping sends a PING and reads up to its PONG: the publisher has handled
// everything the peer sent before it.
func (p *peer) ping() {
	p.t.Helper()
	p.write(command("PING", "\x00\x00ctx"))
	for {
		fl, b := p.frame()
		if fl == 0x04 && bytes.Equal(b, []byte("\x04PONGctx")) {
			return
		}
	}
}

// prefixes returns the subscriptions each subscriber holds.
func prefixes(p *Publisher) []int {
	var n []int
	eachSubscriber(p, func(s *subscriber) { n = append(n, len(s.prefixes)) })
	return n
}

// Attack: one connection sends 1000 distinct subscriptions of 200 bytes.
// Holds: it keeps at most 64 (about 13 KB), the rest are ignored (a
// subscription to the topic past the cap too) and the connection stays
// up; once it cancels one, it can subscribe to the topic and gets the
// batches.
func TestSubscriptionFlood(t *testing.T) {
	p := start(t, func(c *Config) { c.Topic = "kv" }, Options{})
	s := dialPeer(t, p.PubAddr(), "SUB")
	var flood []byte
	for i := range 1000 {
		flood = append(flood, command("SUBSCRIBE", fmt.Sprintf("junk-%04d-%0190d", i, 0))...)
	}
	s.write(flood)
	s.subscribe("kv")
	s.ping()
	if got := prefixes(p); !slices.Equal(got, []int{maxSubscriptions}) {
		t.Fatalf("subscriptions held %v, want [%d]", got, maxSubscriptions)
	}
	if st := p.Stats(); st.Subscribers != 1 || st.Subscribed != 0 {
		t.Fatalf("stats %+v: a subscription past the cap was taken", st)
	}
	s.cancel(fmt.Sprintf("junk-%04d-%0190d", 0, 0))
	s.subscribe("kv")
	s.ping()
	if st := p.Stats(); st.Subscribed != 1 {
		t.Fatalf("stats %+v", st)
	}
	p.Emit(kv.KVEvent{Kind: kv.AllBlocksCleared})
	if m := s.msg(); string(m[0]) != "kv" || binary.BigEndian.Uint64(m[1]) != 0 {
		t.Fatalf("%q", m)
	}
}

// deliveries publishes n batches one at a time and returns how long each
// Publish call took and how long each batch took to reach sub.
func deliveries(t *testing.T, p *Publisher, sub *peer, events []kv.KVEvent, n int) (calls, arrivals []time.Duration) {
	t.Helper()
	for range n {
		begin := time.Now()
		p.Publish(events)
		calls = append(calls, time.Since(begin))
		sub.msg()
		arrivals = append(arrivals, time.Since(begin))
	}
	slices.Sort(calls)
	slices.Sort(arrivals)
	return calls, arrivals
}

// Attack: MaxReplayConns (8) DEALERs ask for every buffered batch from 0
// (500 batches, about 0.8 MB a request): four ask again and again, four
// ask ten times at once and never read; 16 more connect. Holds: the 16
// are refused and counted; while the 8 are served, Publish stays a
// matter of microseconds and a live subscriber gets every batch in a
// fraction of WriteTimeout, however long a replay write blocks: the
// replay path takes the buffer's lock only to list the batches, and
// writes on its own connections.
func TestReplayFlood(t *testing.T) {
	const conns, extra, buffered, writeTimeout = 8, 16, 500, 2 * time.Second
	p := start(t, func(c *Config) {
		c.ReplayEndpoint = "tcp://127.0.0.1:0"
		c.BufferSteps = buffered
	}, Options{MaxReplayConns: conns, WriteTimeout: writeTimeout})
	sub := dialPeer(t, p.PubAddr(), "SUB")
	sub.subscribe("")
	waitPrefixes(t, p, 1)
	events := realisticBatch()
	for range buffered {
		p.Publish(events)
		sub.msg()
	}
	_, quiet := deliveries(t, p, sub, events, 50)

	var dealers []*peer
	for range conns {
		dealers = append(dealers, dialPeer(t, p.ReplayAddr(), "DEALER"))
	}
	for range extra {
		c, err := net.Dial("tcp", p.ReplayAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		if !closed(c, 5*time.Second) {
			t.Fatal("a replay connection past MaxReplayConns was kept")
		}
		c.Close()
	}
	waitRefused(t, p, extra)

	request := wire(nil, make([]byte, 8))
	for _, d := range dealers[conns/2:] {
		d.c.(*net.TCPConn).SetReadBuffer(4 << 10)
		d.write(bytes.Repeat(request, 10))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for _, d := range dealers[:conns/2] {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := d.writeErr(request); err != nil {
					errs <- err
					return
				}
				for {
					m, err := d.msgErr(10 * time.Second)
					if err != nil {
						errs <- err
						return
					}
					if len(m) == 4 && len(m[1]) == 0 && len(m[3]) == 0 {
						break // the end marker: no topic, no payload
					}
				}
			}
		})
	}
	before := p.Stats().Replays
	calls, flooded := deliveries(t, p, sub, events, 50)
	during := p.Stats().Replays - before
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("replays served while measuring: %d; Publish: median %v, max %v; delivery median %v (quiet %v), max %v (quiet %v)",
		during, calls[25], calls[49], flooded[25], quiet[25], flooded[49], quiet[49])
	if during < conns/2 {
		t.Fatalf("only %d replays served during the measurement: not a flood", during)
	}
	if calls[45] > time.Millisecond {
		t.Errorf("Publish took %v at the 90th percentile during the flood", calls[45])
	}
	if flooded[49] > writeTimeout/4 {
		t.Errorf("a batch took %v to reach a live subscriber during the flood (median %v; %v before)", flooded[49], flooded[25], quiet[25])
	}
}

// Attack: one subscriber never reads while 10 others read every batch,
// 10 MB in all. Holds: the 10 get every batch in order; the stalled one's
// queue, and the heap with it, grow no more than its bound (MaxQueueBytes
// of 1 MiB, or hwm of 16 batches of 20 KB) plus slack, the rest of its
// batches dropped and counted.
func TestStalledAmongReaders(t *testing.T) {
	events := []kv.KVEvent{{Kind: kv.BlockStored, BlockHashes: make([]kv.BlockHash, 1), BlockSize: 4096,
		TokenIDs: slices.Repeat([]uint32{1 << 20}, 4096)}}
	payload, err := encodeBatch(0, events, 0, Maps)
	if err != nil {
		t.Fatal(err)
	}
	const readers, total, slack = 10, 10 << 20, 3 << 20
	n := total / len(payload)
	for _, tc := range []struct {
		name     string
		hwm      int
		maxBytes int
		bound    int
		ahead    int // batches published ahead of the slowest reader
	}{
		{"by=bytes", 100000, 1 << 20, 1 << 20, 16},
		{"by=hwm", 16, 0, 16 * len(payload), 8}, // queued or being written
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, func(c *Config) { c.HWM = tc.hwm }, Options{MaxQueueBytes: tc.maxBytes, WriteTimeout: time.Minute})
			stalled := dialPeer(t, p.PubAddr(), "SUB")
			stalled.c.(*net.TCPConn).SetReadBuffer(4 << 10)
			stalled.subscribe("")
			progress := make(chan struct{}, 1)
			cs := subscribers(t, p, readers, len(payload), progress)
			waitPrefixes(t, p, readers+1)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for i := range n {
				if !waitRead(cs, uint64(max(0, i-tc.ahead)), progress, 10*time.Second) {
					t.Fatalf("readers stuck at %d of %d batches", least(cs), i)
				}
				p.Publish(events)
			}
			if !waitRead(cs, uint64(n), progress, 10*time.Second) {
				t.Fatalf("readers read %d of %d batches", least(cs), n)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			var queued int
			eachSubscriber(p, func(s *subscriber) { queued = max(queued, s.qBytes) })
			st := p.Stats()
			t.Logf("%d batches of %d bytes; the heap grew %d bytes, the stalled queue holds %d bytes; %d dropped for it",
				n, len(payload), grew, queued, st.SubscriberDrops)
			if queued > tc.bound {
				t.Errorf("the stalled subscriber's queue holds %d bytes, bound %d", queued, tc.bound)
			}
			if grew > int64(tc.bound+slack) {
				t.Errorf("the heap grew %d bytes, bound %d plus %d", grew, tc.bound, slack)
			}
			if st.Subscribers != readers+1 || st.SubscriberDrops == 0 || st.Dropped != 0 {
				t.Errorf("stats %+v", st)
			}
			for i, c := range cs {
				if got := c.got.Load(); got != uint64(n) {
					t.Errorf("reader %d got %d of %d batches: %v", i, got, n, c.err)
				}
			}
		})
	}
}

// syncBuffer is a log's destination that goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bigBatch is one BlockStored of about 20 KB of payload.
func bigBatch() []kv.KVEvent {
	return []kv.KVEvent{{Kind: kv.BlockStored, BlockHashes: make([]kv.BlockHash, 1), BlockSize: 4096,
		TokenIDs: slices.Repeat([]uint32{1 << 20}, 4096)}}
}

// shrinkSendBuffers makes the publisher's side of each subscriber's
// connection buffer little, so that a peer that does not read stalls
// the writer within a few batches.
func shrinkSendBuffers(t *testing.T, p *Publisher) {
	eachSubscriber(p, func(s *subscriber) {
		if err := s.c.(*net.TCPConn).SetWriteBuffer(16 << 10); err != nil {
			t.Fatal(err)
		}
	})
}

// Attack: a subscriber asks for a PONG, then reads nothing while 40
// batches of 20 KB are published to it. Holds: the writer cuts it after
// WriteTimeout, and each batch is either one the peer can still read
// whole, or counted dropped and logged: none goes uncounted (the PONG's
// write fails too), none counted twice.
func TestCutSubscriberCountsEveryBatch(t *testing.T) {
	var logged syncBuffer
	p := start(t, nil, Options{WriteTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	sub := dialPeer(t, p.PubAddr(), "SUB")
	sub.c.(*net.TCPConn).SetReadBuffer(4 << 10)
	sub.subscribe("")
	waitPrefixes(t, p, 1)
	shrinkSendBuffers(t, p)
	sub.write(command("PING", "\x00\x00ctx"))
	const n = 40
	for range n {
		p.Publish(bigBatch())
	}
	// Every batch reaches the subscriber's queue before the cut can come:
	// one offered after it is no drop.
	waitSettled(t, p)
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Subscribers != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// What the kernel took, the peer reads before the end of the stream.
	got := 0
	for {
		if _, err := sub.msgErr(5 * time.Second); err != nil {
			break
		}
		got++
	}
	st := p.Stats()
	t.Logf("the peer read %d batches; %d counted dropped", got, st.SubscriberDrops)
	if st.Subscribers != 0 || st.Published != n {
		t.Fatalf("stats %+v", st)
	}
	if uint64(got)+st.SubscriberDrops != n || st.SubscriberDrops == 0 {
		t.Errorf("%d batches read and %d counted dropped, of %d", got, st.SubscriberDrops, n)
	}
	// Close reports what its rate limit held back.
	p.Close()
	var counted uint64
	for _, m := range regexp.MustCompile(`msg="kv events: batches a subscriber did not get[^"]*" count=(\d+)`).FindAllStringSubmatch(logged.String(), -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		counted += n
	}
	if counted != st.SubscriberDrops {
		t.Errorf("the log counts %d drops, Stats %d:\n%s", counted, st.SubscriberDrops, logged.String())
	}
}

// A subscriber that takes a batch every 100 ms, on a write timeout of
// 600 ms, is served though a write of many batches at once takes it far
// longer: the timeout is renewed for each batch taken, as if each were a
// write of its own.
func TestSlowSubscriberIsServed(t *testing.T) {
	p := start(t, nil, Options{WriteTimeout: 600 * time.Millisecond})
	sub := dialPeer(t, p.PubAddr(), "SUB")
	sub.c.(*net.TCPConn).SetReadBuffer(32 << 10)
	sub.subscribe("")
	waitPrefixes(t, p, 1)
	shrinkSendBuffers(t, p)
	const n = 24 // two writes of 12, each about 250 KB
	for range n {
		p.Publish(bigBatch())
	}
	for i := range uint64(n) {
		time.Sleep(100 * time.Millisecond)
		m, err := sub.msgErr(5 * time.Second)
		if err != nil {
			t.Fatalf("batch %d: %v (stats %+v)", i, err, p.Stats())
		}
		if got := binary.BigEndian.Uint64(m[1]); got != i {
			t.Fatalf("batch %d has sequence number %d", i, got)
		}
	}
	if st := p.Stats(); st.SubscriberDrops != 0 || st.Subscribers != 1 {
		t.Errorf("stats %+v", st)
	}
}

// replayAll asks d for a replay from seq from and returns the sequence
// numbers it sends before the end marker.
func replayAll(t *testing.T, d *peer, from uint64) []uint64 {
	t.Helper()
	d.send(nil, binary.BigEndian.AppendUint64(nil, from))
	var seqs []uint64
	for {
		m := d.msg()
		if len(m) != 4 {
			t.Fatalf("replay message %q", m)
		}
		if len(m[1]) == 0 && bytes.Equal(m[2], bytes.Repeat([]byte{0xFF}, 8)) {
			return seqs
		}
		seqs = append(seqs, binary.BigEndian.Uint64(m[2]))
	}
}

// seqRange is the sequence numbers from first through last.
func seqRange(first, last uint64) []uint64 {
	var s []uint64
	for i := first; i <= last; i++ {
		s = append(s, i)
	}
	return s
}

// The replay buffer holds no more than MaxReplayBytes of payload,
// whatever buffer_steps allows: with room for five batches of 20 KB,
// a replay from 0 of 20 sends the last five.
func TestReplayBufferBytes(t *testing.T) {
	payload, err := encodeBatch(0, bigBatch(), 0, Maps)
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, func(c *Config) { c.ReplayEndpoint = "tcp://127.0.0.1:0" },
		Options{MaxReplayBytes: 5*len(payload) + len(payload)/2})
	for range 20 {
		p.Publish(bigBatch())
	}
	waitSettled(t, p)
	d := dialPeer(t, p.ReplayAddr(), "DEALER")
	if got, want := replayAll(t, d, 0), seqRange(15, 19); !slices.Equal(got, want) {
		t.Errorf("replay from 0 sent %v, want %v", got, want)
	}
	p.ringMu.Lock()
	held := p.ringBytes
	p.ringMu.Unlock()
	if held != 5*len(payload) {
		t.Errorf("the buffer holds %d bytes, want %d", held, 5*len(payload))
	}
}

// A replay of more batches than a chunk sends each once, in order, from
// any start: the first, one inside a chunk, one past the newest.
func TestReplayAcrossChunks(t *testing.T) {
	const n = 3*replayChunk + 5
	p := start(t, func(c *Config) {
		c.ReplayEndpoint = "tcp://127.0.0.1:0"
		c.BufferSteps = n - 10
	}, Options{})
	for range n {
		p.Publish(sample()[:1])
	}
	waitSettled(t, p)
	d := dialPeer(t, p.ReplayAddr(), "DEALER")
	for _, tc := range []struct{ from, first uint64 }{{0, 10}, {100, 100}, {n - 1, n - 1}, {n, n}, {1<<64 - 1, n}} {
		if got, want := replayAll(t, d, tc.from), seqRange(tc.first, n-1); !slices.Equal(got, want) {
			t.Errorf("replay from %d sent %v, want %v", tc.from, got, want)
		}
	}
}

// Attack: a replay peer completes the handshake and asks nothing, holding
// the only replay slot; another sends malformed requests by the hundred.
// Holds: the idle one is closed after ReplayIdle and the slot serves the
// next peer; the malformed requests are ignored, as vLLM ignores them,
// and logged at most once per interval with their count.
func TestIdleAndMalformedReplayPeers(t *testing.T) {
	var logged syncBuffer
	p := start(t, func(c *Config) { c.ReplayEndpoint = "tcp://127.0.0.1:0" },
		Options{MaxReplayConns: 1, ReplayIdle: time.Second, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	p.Publish(sample()[:1])
	waitSettled(t, p)
	idle := dialPeer(t, p.ReplayAddr(), "DEALER")
	if !closed(idle.c, 5*time.Second) {
		t.Fatal("an idle replay peer was kept past ReplayIdle")
	}
	d := dialPeer(t, p.ReplayAddr(), "DEALER")
	const bad = 200
	d.write(bytes.Repeat(wire(nil, []byte{1, 2}), bad))
	if got := replayAll(t, d, 0); !slices.Equal(got, []uint64{0}) {
		t.Fatalf("after %d malformed requests, replay from 0 sent %v", bad, got)
	}
	if n := strings.Count(logged.String(), "replay requests ignored"); n != 1 {
		t.Errorf("%d log lines for %d malformed requests, want 1:\n%s", n, bad, logged.String())
	}
	p.Close()
	if !strings.Contains(logged.String(), fmt.Sprintf("count=%d", bad-1)) {
		t.Errorf("Close does not report the rest of the %d:\n%s", bad, logged.String())
	}
}
