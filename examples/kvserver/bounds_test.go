//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// testConn is a connector for serve's bounds: its saves wait for gate to
// close, if it is not nil, and each prefill reports event, if it has
// tokens, once its first layer is saved.
type testConn struct {
	gate  chan struct{}
	event kv.KVEvent
	emit  kv.EventFunc
	// saving counts SaveLayer calls under way; closedSaving is set when
	// Close finds one.
	saving       atomic.Int32
	closedSaving atomic.Bool
}

func (c *testConn) MatchedTokens(context.Context, *kv.Request, int) (int, error) { return 0, nil }
func (c *testConn) AfterAlloc(context.Context, *kv.Request, int) error           { return nil }
func (c *testConn) RequestFinished(context.Context, *kv.Request) error           { return nil }
func (c *testConn) SaveLayer(ctx context.Context, _ *kv.Request, layer string, _ int, _ []byte) error {
	c.saving.Add(1)
	defer c.saving.Add(-1)
	if c.gate != nil {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if emit := c.emit.Get(); emit != nil && len(c.event.TokenIDs) > 0 && layer == "model.layers.0.self_attn" {
		emit(c.event)
	}
	return nil
}
func (c *testConn) LoadLayer(context.Context, *kv.Request, string, int) ([]byte, error) {
	return nil, kv.ErrMiss
}
func (c *testConn) WaitForSave(context.Context) error { return nil }
func (c *testConn) Finished(_ context.Context, f []string) ([]string, []string, error) {
	return f, f, nil
}
func (c *testConn) Close() error {
	c.closedSaving.Store(c.saving.Load() > 0)
	return nil
}
func (c *testConn) ReportEvents(emit func(kv.KVEvent)) { c.emit.Set(emit) }

// testRegistry links c alone, as "test".
func testRegistry(c *testConn) *kv.Registry {
	return kv.MustNew(kv.Entry{Name: "test", Factory: func(context.Context, kv.Config, kv.Role) (kv.Connector, error) {
		return c, nil
	}})
}

// served is kvserver serving in this process.
type served struct {
	base string
	stop context.CancelFunc
	code chan int // run's exit code, once it returns
	errs *syncBuffer
}

// serveInProcess runs kvserver serve with reg and args on a free port,
// and stops it when the test ends.
func serveInProcess(t *testing.T, reg *kv.Registry, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errs := &syncBuffer{}, &syncBuffer{}
	s := &served{stop: cancel, code: make(chan int, 1), errs: errs}
	args = append(append([]string{"-kv-transfer-config", `{"kv_connector":"test"}`, "-listen", "127.0.0.1:0"}, args...), "serve")
	go func() { s.code <- run(ctx, reg, args, out, errs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.code:
		case <-time.After(60 * time.Second):
			t.Error("kvserver did not stop")
		}
	})
	re := regexp.MustCompile(`on (http://\S+)\n`)
	require.Eventually(t, func() bool { return re.MatchString(out.String()) }, 10*time.Second, time.Millisecond, "stderr: %s", errs)
	s.base = re.FindStringSubmatch(out.String())[1]
	return s
}

// stopped stops the server and returns how long it took and its exit code.
func (s *served) stopped(t *testing.T) (time.Duration, int) {
	start := time.Now()
	s.stop()
	select {
	case code := <-s.code:
		s.code <- code // for the cleanup
		return time.Since(start), code
	case <-time.After(60 * time.Second):
		t.Fatal("kvserver did not stop within 60 s")
		return 0, 0
	}
}

// answer posts body to a step and returns the status, the Retry-After
// header and the body.
func answer(t *testing.T, base, step, body string) (int, string, string) {
	t.Helper()
	resp, err := scrapes.Post(base+"/"+step, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	msg, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(msg)
}

// Requests in flight and the prompt tokens of the steps in flight are
// bounded: a request past either bound is answered at once with 503 and
// Retry-After, and /metrics shows the bounds and what is in flight. Forty
// prefills of 1,048,576 tokens at once once ran serve out of memory.
func TestServeBoundsWorkInFlight(t *testing.T) {
	conn := &testConn{gate: make(chan struct{})}
	s := serveInProcess(t, testRegistry(conn), "-max-requests", "2", "-max-prompt-tokens", "600", "-max-tokens-in-flight", "1000")
	assert.Equal(t, 2.0, metric(t, s.base, "kvserver_requests_in_flight_limit"))
	assert.Equal(t, 1000.0, metric(t, s.base, "kvserver_tokens_in_flight_limit"))

	// Two steps wait in the connector, holding 600 and 400 tokens.
	var wg sync.WaitGroup
	held := func(body string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, msg := answer(t, s.base, "prefill", body)
			assert.Equal(t, http.StatusOK, code, msg)
		}()
	}
	held(`{"prompt":"a","tokens":600}`)
	require.Eventually(t, func() bool { return metric(t, s.base, "kvserver_tokens_in_flight") == 600 }, 10*time.Second, time.Millisecond)

	code, retry, msg := answer(t, s.base, "prefill", `{"prompt":"b","tokens":401}`)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "1", retry)
	assert.Contains(t, msg, "a step of 401 tokens would pass the 1000 tokens in flight (-max-tokens-in-flight)")

	held(`{"prompt":"c","tokens":400}`)
	require.Eventually(t, func() bool { return metric(t, s.base, "kvserver_tokens_in_flight") == 1000 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, 2.0, metric(t, s.base, "kvserver_requests_in_flight"))
	code, retry, msg = answer(t, s.base, "decode", `{"prompt":"d","tokens":17}`)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "1", retry)
	assert.Contains(t, msg, "2 requests in flight (-max-requests)")
	assert.Equal(t, 1.0, metric(t, s.base, `kvserver_steps_total{outcome="busy",step="prefill"}`))
	assert.Equal(t, 1.0, metric(t, s.base, `kvserver_steps_total{outcome="busy",step="decode"}`))

	// Once they are answered, what they held is free again.
	close(conn.gate)
	wg.Wait()
	assert.Zero(t, metric(t, s.base, "kvserver_tokens_in_flight"))
	assert.Zero(t, metric(t, s.base, "kvserver_requests_in_flight"))
	code, _, msg = answer(t, s.base, "prefill", `{"prompt":"b","tokens":600}`)
	assert.Equal(t, http.StatusOK, code, msg)
	code, _, msg = answer(t, s.base, "prefill", `{"prompt":"b","tokens":601}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, msg, "tokens: want from 1 to 600 (-max-prompt-tokens)")
}

// bigEvent is an event of 1,048,576 tokens: about 11 MB of JSON, more than
// a connection's buffers hold.
func bigEvent() kv.KVEvent {
	tokens := make([]uint32, 1<<20)
	for i := range tokens {
		tokens[i] = 4_000_000_000 + uint32(i%1000)
	}
	return kv.KVEvent{Kind: kv.BlockStored, TokenIDs: tokens, BlockSize: 16, Medium: kv.MediumCPU}
}

// stalledFollower follows /events with a receive buffer of 4 KB and never
// reads, and returns once the server is blocked writing to it an event
// that the connection's buffers cannot hold.
func stalledFollower(t *testing.T, s *served) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, "GET /events HTTP/1.1\r\nHost: kvserver\r\n\r\n")
	require.NoError(t, err)
	// What has arrived, looked at without reading it.
	raw, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	arrived := func(want string) func() bool {
		return func() bool {
			var buf [4096]byte
			n := 0
			require.NoError(t, raw.Control(func(fd uintptr) {
				n, _, _ = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			}))
			return n > 0 && strings.Contains(string(buf[:n]), want)
		}
	}
	require.Eventually(t, arrived("200 OK"), 10*time.Second, time.Millisecond, "the stream starts")
	code, _, msg := answer(t, s.base, "prefill", `{"prompt":"p","tokens":100}`)
	require.Equal(t, http.StatusOK, code, msg)
	// The event has begun to arrive: the rest waits in the server's Write.
	require.Eventually(t, arrived(`"BlockStored"`), 30*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // for the buffers to fill
	return c
}

// A stop does not wait for an /events follower that does not read: its
// stream ends at once, even while the server is blocked writing to it. It
// once held the stop for the whole 30 s and the stop failed.
func TestShutdownDoesNotWaitForStalledFollowers(t *testing.T) {
	s := serveInProcess(t, testRegistry(&testConn{event: bigEvent()}))
	stalledFollower(t, s)
	took, code := s.stopped(t)
	t.Logf("stopped in %v", took)
	assert.Equal(t, 0, code, "stderr: %s", s.errs)
	assert.Less(t, took, 3*time.Second)
}

// A follower that takes longer than -events-write-timeout over an event is
// dropped, and its connection closed, while the server goes on serving.
func TestStalledFollowerIsDropped(t *testing.T) {
	s := serveInProcess(t, testRegistry(&testConn{event: bigEvent()}), "-events-write-timeout", "500ms")
	c := stalledFollower(t, s)
	require.Eventually(t, func() bool { return metric(t, s.base, "kvserver_event_followers") == 0 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1.0, metric(t, s.base, "kvserver_event_followers_dropped_total"))
	// The stream ends: what was sent, then the end of the connection.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := io.Copy(io.Discard, c)
	require.NoError(t, err, "the connection is closed, not left open")
}

// A follower whose queue would pass -events-lag-bytes is dropped at once:
// what the events of one follower hold is bounded.
func TestEventHubDropsAFollowerFallingBehind(t *testing.T) {
	h := newEventHub(2000)
	f := h.subscribe(http.NewResponseController(httptest.NewRecorder()))
	e := kv.KVEvent{Kind: kv.BlockStored, TokenIDs: make([]uint32, 50), BlockSize: 16}
	h.publish(e) // 512 + 16*50 = 1312 bytes
	ev, ended := f.next()
	require.NotNil(t, ev)
	assert.False(t, ended)
	h.publish(e) // 1312 queued, with the one being sent: 2624
	n, dropped := h.stats()
	assert.Equal(t, 0, n)
	assert.Equal(t, 1, dropped)
	_, ended = f.next()
	assert.True(t, ended)

	// An event larger than the lag reaches a follower that has caught up.
	f = h.subscribe(http.NewResponseController(httptest.NewRecorder()))
	h.publish(kv.KVEvent{Kind: kv.BlockStored, TokenIDs: make([]uint32, 500)})
	ev, ended = f.next()
	assert.NotNil(t, ev)
	assert.False(t, ended)
}

// A request body that stalls is cut at -read-timeout, the connection
// closed: slow bodies once held their connections for as long as they
// trickled.
func TestSlowBodyIsCut(t *testing.T) {
	s := serveInProcess(t, testRegistry(&testConn{}), "-read-timeout", "1s")
	// net/http reads what is left of a body of less than 256 KiB before
	// it answers, and closes the connection past that.
	for _, length := range []int{1000000, 1000} {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
		require.NoError(t, err)
		defer c.Close()
		start := time.Now()
		_, err = fmt.Fprintf(c, "POST /prefill HTTP/1.1\r\nHost: kvserver\r\nContent-Length: %d\r\n\r\n{ ", length)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "Content-Length %d", length)
		assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		assert.Less(t, time.Since(start), 5*time.Second)
	}
}

// A request past -max-requests is answered 503 at once, even while its
// chunked body trickles in: net/http once read what was left of the body
// first, so the 503 came only at -read-timeout.
func TestBusyAnswersBeforeTheBody(t *testing.T) {
	s := serveInProcess(t, testRegistry(&testConn{}), "-max-requests", "1", "-read-timeout", "30s")
	addr := strings.TrimPrefix(s.base, "http://")
	trickle := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = io.WriteString(c, "POST /prefill HTTP/1.1\r\nHost: kvserver\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{ \r\n")
		require.NoError(t, err)
		return c
	}
	trickle() // holds the one request in flight, its body unfinished
	require.Eventually(t, func() bool { return metric(t, s.base, "kvserver_requests_in_flight") == 1 }, 10*time.Second, time.Millisecond)
	c := trickle()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "no answer before -read-timeout")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
}

// A stop cuts request bodies that stall after -shutdown-read-timeout (5 s
// by default), instead of waiting for them for the whole -shutdown-timeout.
// A connection trickling its body once held the stop for 30 s, and the
// stop failed.
func TestShutdownCutsStalledBodies(t *testing.T) {
	s := serveInProcess(t, testRegistry(&testConn{}))
	// Under 256 KiB left, net/http reads the rest before it answers (see
	// TestSlowBodyIsCut): that read must not hold the stop either.
	for _, length := range []int{1000000, 1000} {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
		require.NoError(t, err)
		defer c.Close()
		_, err = fmt.Fprintf(c, "POST /prefill HTTP/1.1\r\nHost: kvserver\r\nContent-Length: %d\r\n\r\n{ ", length)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return metric(t, s.base, "kvserver_requests_in_flight") == 2 }, 10*time.Second, time.Millisecond)
	took, code := s.stopped(t)
	t.Logf("stopped in %v", took)
	assert.Equal(t, 0, code, "stderr: %s", s.errs)
	assert.Less(t, took, 10*time.Second)
}

// No more than -max-conns connections are open at once: one more waits
// to be accepted until another closes.
func TestConnectionsAreCapped(t *testing.T) {
	s := serveInProcess(t, testRegistry(&testConn{}), "-max-conns", "2")
	// A client that keeps its one connection holds one; an idle
	// connection holds the other.
	scraper := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	scrape := func(series string) float64 {
		resp, err := scraper.Get(s.base + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
				var f float64
				_, err := fmt.Sscan(v, &f)
				require.NoError(t, err)
				return f
			}
		}
		return -1
	}
	assert.Equal(t, 2.0, scrape("kvserver_connections_limit"))
	idle, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return scrape("kvserver_connections_open") == 2 }, 10*time.Second, 10*time.Millisecond)

	third := &http.Client{Timeout: 500 * time.Millisecond}
	_, err = third.Get(s.base + "/healthz")
	require.Error(t, err, "a third connection is not served while two are open")

	require.NoError(t, idle.Close())
	third.Timeout = 10 * time.Second
	resp, err := third.Get(s.base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// A step that outlasts -shutdown-timeout is cut when the wait runs out:
// its connection is closed, which cancels it, and the connectors are
// closed only once it has returned, never under it.
func TestStopCutsStepsPastTheWait(t *testing.T) {
	c := &testConn{gate: make(chan struct{})} // SaveLayer waits for its context
	s := serveInProcess(t, testRegistry(c), "-shutdown-timeout", "300ms")
	go func() {
		resp, err := http.Post(s.base+"/prefill", "application/json", strings.NewReader(`{"tokens":32}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return c.saving.Load() == 1 }, 10*time.Second, time.Millisecond)
	took, code := s.stopped(t)
	t.Logf("stopped in %v, exit %d: %s", took, code, s.errs)
	assert.Equal(t, 1, code, "the wait ran out")
	assert.Contains(t, s.errs.String(), "shutdown: context deadline exceeded")
	assert.False(t, c.closedSaving.Load(), "the connector was closed under a step still saving")
	assert.Zero(t, c.saving.Load(), "a step still saving after kvserver returned")
	assert.Less(t, took, 5*time.Second)
}

// A client that pipelines requests and never reads the answers holds no
// stop: what is being written at a stop gets -shutdown-read-timeout to be
// taken, as bodies do to arrive. And an answer quotes at most 512 bytes of
// a request: a decoder's error quotes the key it refused whole.
func TestShutdownDoesNotWaitForClientsThatDoNotRead(t *testing.T) {
	s := serveInProcess(t, testRegistry(&testConn{}), "-shutdown-read-timeout", "300ms")
	host := strings.TrimPrefix(s.base, "http://")

	resp, err := http.Post(s.base+"/prefill", "application/json", strings.NewReader(`{"`+strings.Repeat("k", 600<<10)+`": 1}`))
	require.NoError(t, err)
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Less(t, len(answer), 1024, "the answer quotes the refused key whole")
	assert.Contains(t, string(answer), "(cut short)")

	c, err := net.Dial("tcp", host)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
	var written atomic.Int64
	go func() {
		req := []byte("GET /metrics HTTP/1.1\r\nHost: kvserver\r\n\r\n")
		for range 100000 {
			n, err := c.Write(req)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	// The server stops reading requests once it cannot write answers.
	require.Eventually(t, func() bool {
		n := written.Load()
		time.Sleep(200 * time.Millisecond)
		return n > 0 && written.Load() == n
	}, 20*time.Second, time.Millisecond, "the client never filled the connection")

	took, code := s.stopped(t)
	t.Logf("stopped in %v", took)
	assert.Equal(t, 0, code, "stderr: %s", s.errs)
	assert.Less(t, took, 10*time.Second)
}
