package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvgen/kvgen/examples/external/kvevents"
	"github.com/kvgen/kvgen/registry/kv"
)

// stepRequest is the body of POST /prefill and POST /decode.
type stepRequest struct {
	// ID identifies the request; a fresh one by default.
	ID string `json:"id"`
	// Prompt and Tokens make the prompt, as -prompt and -tokens do; a
	// missing Tokens is -tokens' default, 100.
	Prompt string `json:"prompt"`
	Tokens *int   `json:"tokens"`
}

// server is kvserver's serve mode: one engine, its connectors created at
// start, prefill and decode steps over HTTP, and what an operator watches.
type server struct {
	e        *engine
	log      *slog.Logger
	lim      limits
	events   *eventHub
	requests gate // requests in flight
	tokens   gate // prompt tokens of the steps in flight
	bodies   bodyReaders
	stopping atomic.Bool // answers get ShutdownReadTimeout to be taken
	steps    *prometheus.CounterVec
	prompt   *prometheus.CounterVec
	nextID   atomic.Uint64
}

// serve runs the server on listen until ctx ends or SIGTERM or SIGINT
// arrives, then stops taking connections and waits for the requests in
// flight. It prints the address it listens on first, so that port 0 can be
// asked for, and says on stderr when it stops and how the stop went: an
// operator reading a pod's log sees the drain, not a silent exit.
func serve(ctx context.Context, e *engine, lim limits, listen string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Both sides exist before the first request, so that stats and events
	// cover every transfer and requests share them without a race.
	if _, err := e.schedulerSide(ctx); err != nil {
		return err
	}
	w, err := e.workerSide(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	conns := newLimitListener(ln, lim.Conns)
	s := &server{
		e:        e,
		log:      e.log,
		lim:      lim,
		events:   newEventHub(lim.EventsLagBytes),
		requests: gate{max: int64(lim.Requests)},
		tokens:   gate{max: int64(lim.TokensInFlight)},
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvserver_steps_total", Help: "Prefill and decode steps served, by step and outcome (ok, error, bad_request, busy: refused past a bound)."},
			[]string{"step", "outcome"}),
		prompt: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvserver_prompt_tokens_total", Help: "Prompt tokens of decode steps, by whether their KV was loaded or recomputed."},
			[]string{"source"}),
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.steps, s.prompt, &statsCollector{connector: e.cfg.Connector, worker: w},
		gauge("kvserver_requests_in_flight", "Prefill and decode requests being served.", func() float64 { return float64(s.requests.n.Load()) }),
		gauge("kvserver_requests_in_flight_limit", "The most prefill and decode requests served at once (-max-requests).", func() float64 { return float64(lim.Requests) }),
		gauge("kvserver_tokens_in_flight", "Prompt tokens of the steps being run.", func() float64 { return float64(s.tokens.n.Load()) }),
		gauge("kvserver_tokens_in_flight_limit", "The most prompt tokens of steps run at once (-max-tokens-in-flight).", func() float64 { return float64(lim.TokensInFlight) }),
		gauge("kvserver_connections_open", "Connections open.", func() float64 { return float64(conns.open()) }),
		gauge("kvserver_connections_limit", "The most connections open at once (-max-conns).", func() float64 { return float64(lim.Conns) }),
		gauge("kvserver_event_followers", "Followers of /events.", func() float64 { n, _ := s.events.stats(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvserver_event_followers_dropped_total", Help: "Followers of /events dropped for falling behind (-events-lag-bytes) or taking too long over an event (-events-write-timeout)."},
			func() float64 { _, n := s.events.stats(); return float64(n) }),
	)
	if pub := e.events; pub != nil {
		counter := func(name, help string, f func(kvevents.Stats) uint64) prometheus.Collector {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(pub.Stats())) })
		}
		reg.MustRegister(
			counter("kvserver_kv_events_published_total", "Batches of KV events published on ZeroMQ (-kv-events-config): the events reported within one gather of 10ms share a batch.",
				func(s kvevents.Stats) uint64 { return s.Published }),
			counter("kvserver_kv_events_dropped_total", "KV events dropped before they were published: the queue of max_queue_size was full. Each keeps its sequence number, so subscribers see the gap.",
				func(s kvevents.Stats) uint64 { return s.Dropped }),
			counter("kvserver_kv_events_subscriber_dropped_total", "Batches of KV events a subscriber did not get: its queue was at hwm, or it was disconnected with batches queued.",
				func(s kvevents.Stats) uint64 { return s.SubscriberDrops }),
			counter("kvserver_kv_events_replays_total", "Replay requests served on replay_endpoint.",
				func(s kvevents.Stats) uint64 { return s.Replays }),
			counter("kvserver_kv_events_sequenced_total", "Sequence numbers given: to batches published or still queued, and to each KV event dropped.",
				func(s kvevents.Stats) uint64 { return s.Sequenced }),
			gauge("kvserver_kv_events_subscribers", "Subscribers connected to the KV events publisher.",
				func() float64 { return float64(pub.Stats().Subscribers) }),
			gauge("kvserver_kv_events_subscribed", "Subscribers whose subscription matches the topic: those that get the events.",
				func() float64 { return float64(pub.Stats().Subscribed) }),
		)
	}
	if r, ok := w.(kv.StatsReporter); ok {
		r.KVStats() // connectors count from the first read: from now on
	}
	if r, ok := w.(kv.EventReporter); ok {
		emit := s.events.publish
		if pub := e.events; pub != nil {
			// The same events, to /events and on vLLM's wire.
			emit = func(ev kv.KVEvent) {
				s.events.publish(ev)
				pub.Emit(ev)
			}
		}
		r.ReportEvents(emit)
		defer r.ReportEvents(nil)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /events", s.follow)
	mux.HandleFunc("POST /prefill", s.step)
	mux.HandleFunc("POST /decode", s.step)

	fmt.Fprintf(stdout, "kvserver: serving through %s on http://%s\n", kv.Quote(e.cfg.Connector), ln.Addr())
	if pub := e.events; pub != nil {
		// The addresses bound, so that an endpoint of port 0 can be found.
		for _, a := range []struct {
			what string
			addr net.Addr
		}{{"published", pub.PubAddr()}, {"replayed", pub.ReplayAddr()}} {
			if a.addr != nil {
				fmt.Fprintf(stdout, "kvserver: kv events %s on %s\n", a.what, zmqAddr(a.addr))
			}
		}
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout, // /events moves it on for each event
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.HeaderBytes,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	// Followers of /events stream until they leave: a shutdown ends their
	// streams, or it would wait for them forever.
	srv.RegisterOnShutdown(s.events.close)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(conns) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	start, inFlight := time.Now(), s.requests.n.Load()
	fmt.Fprintf(stderr, "kvserver: stopping: draining %s in flight (at most %s)\n", plural(inFlight, "request"), lim.ShutdownTimeout)
	// Bodies still on their way get a little longer; one that stalls
	// would otherwise hold the stop for as long as -read-timeout.
	s.bodies.stop(lim.ShutdownReadTimeout)
	// So do answers still being written: one to a client that does not
	// read would hold the stop for as long as -write-timeout.
	s.stopping.Store(true)
	conns.cutWrites(lim.ShutdownReadTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), lim.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Steps past the wait are cut: closing their connections cancels
		// their contexts. run closes the connectors once serve returns, so
		// serve waits for the steps to end first, a little longer.
		srv.Close()
		s.requests.wait(lim.ShutdownReadTimeout)
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintf(stderr, "kvserver: stopped after %s: the %s in flight drained\n", time.Since(start).Round(time.Millisecond), plural(inFlight, "request"))
	return nil
}

// busy answers 503 with Retry-After: a bound is reached, and the client
// may try again in a moment.
func busy(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "kvserver: busy: "+why+"; retry later", http.StatusServiceUnavailable)
}

// step serves POST /prefill and POST /decode: the JSON body names the
// prompt, the answer is the report kvserver prints with -json.
func (s *server) step(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Path[1:]
	if !s.requests.take(1) {
		s.steps.WithLabelValues(name, "busy").Inc()
		// The body is still on its way, and net/http would read what is
		// left of it before answering, at the client's pace: closing
		// the connection after the answer sends the answer now.
		w.Header().Set("Connection", "close")
		busy(w, fmt.Sprintf("%d requests in flight (-max-requests)", s.lim.Requests))
		return
	}
	defer s.requests.give(1)
	if lc, ok := r.Context().Value(connKey{}).(*limitConn); ok {
		lc.steps.Add(1)
		defer lc.steps.Add(-1)
		w = &answerWriter{ResponseWriter: w, s: s, conn: lc}
	}
	// No work outlives the time to answer, which runs from the header.
	ctx, cancel := context.WithTimeout(r.Context(), s.lim.WriteTimeout)
	defer cancel()
	data, err := s.bodies.read(http.NewResponseController(w), http.MaxBytesReader(w, r.Body, s.lim.BodyBytes))
	if err != nil {
		s.steps.WithLabelValues(name, "bad_request").Inc()
		status := http.StatusBadRequest
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			status = http.StatusRequestTimeout
		}
		// What is left of the body may never come: net/http would wait
		// for up to 256 KiB of it before answering, and then keep the
		// connection. Closing it sends the answer now.
		w.Header().Set("Connection", "close")
		http.Error(w, "kvserver: request body: "+answerError(err), status)
		return
	}
	var body stepRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(&body)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("want one JSON object, with nothing after it")
	}
	if err != nil {
		s.steps.WithLabelValues(name, "bad_request").Inc()
		http.Error(w, "kvserver: request body: "+answerError(err), http.StatusBadRequest)
		return
	}
	if body.Prompt == "" {
		body.Prompt = "The quick brown fox jumps over the lazy dog"
	}
	tokens := 100
	if body.Tokens != nil {
		tokens = *body.Tokens
	}
	if err := s.lim.checkTokens(tokens); err != nil {
		s.steps.WithLabelValues(name, "bad_request").Inc()
		http.Error(w, "kvserver: tokens: "+answerError(err), http.StatusBadRequest)
		return
	}
	if !s.tokens.take(int64(tokens)) {
		s.steps.WithLabelValues(name, "busy").Inc()
		busy(w, fmt.Sprintf("a step of %d tokens would pass the %d tokens in flight (-max-tokens-in-flight)", tokens, s.lim.TokensInFlight))
		return
	}
	defer s.tokens.give(int64(tokens))
	if body.ID == "" {
		body.ID = fmt.Sprintf("req-%d", s.nextID.Add(1))
	}
	req := &kv.Request{ID: body.ID, PromptTokens: tokenize(body.Prompt, tokens)}
	var report any
	if name == "prefill" {
		report, err = s.e.prefill(ctx, req)
	} else {
		var d *decodeReport
		if d, err = s.e.decode(ctx, req); err == nil {
			s.prompt.WithLabelValues("loaded").Add(float64(d.Loaded))
			s.prompt.WithLabelValues("recomputed").Add(float64(d.Recomputed))
		}
		report = d
	}
	if err != nil {
		outcome, status := "error", http.StatusInternalServerError
		switch {
		case errors.Is(err, errWrongData):
			status = http.StatusBadGateway
		case errors.Is(err, errShortPrompt):
			outcome, status = "bad_request", http.StatusBadRequest
		}
		s.steps.WithLabelValues(name, outcome).Inc()
		http.Error(w, "kvserver: "+answerError(err), status)
		return
	}
	s.steps.WithLabelValues(name, "ok").Inc()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(report)
}

// answerError is err's text for an answer, cut to 512 bytes: a JSON
// decoder's error quotes the request, whose keys may be a megabyte.
func answerError(err error) string {
	const most = 512
	msg := err.Error()
	if len(msg) > most {
		msg = strings.ToValidUTF8(msg[:most], "") + "... (cut short)"
	}
	return msg
}

// answerWriter is a step's http.ResponseWriter: an answer begun once a
// stop has, gets ShutdownReadTimeout to be taken, as cutWrites gives the
// other connections.
type answerWriter struct {
	http.ResponseWriter
	s       *server
	conn    *limitConn
	started bool
}

func (a *answerWriter) start() {
	if !a.started {
		a.started = true
		if a.s.stopping.Load() {
			_ = a.conn.SetWriteDeadline(time.Now().Add(a.s.lim.ShutdownReadTimeout))
		}
	}
}

func (a *answerWriter) WriteHeader(code int) {
	a.start()
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWriter) Write(p []byte) (int, error) {
	a.start()
	return a.ResponseWriter.Write(p)
}

// Unwrap is for http.ResponseController.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// bodyReaders are the requests reading their body, so that a stop can cut
// the ones that stall.
type bodyReaders struct {
	mu       sync.Mutex
	readers  map[*http.ResponseController]bool
	stopping bool
	grace    time.Duration
}

// read reads a request's whole body.
func (b *bodyReaders) read(rc *http.ResponseController, body io.Reader) ([]byte, error) {
	b.mu.Lock()
	if b.readers == nil {
		b.readers = map[*http.ResponseController]bool{}
	}
	b.readers[rc] = true
	if b.stopping {
		_ = rc.SetReadDeadline(time.Now().Add(b.grace))
	}
	b.mu.Unlock()
	data, err := io.ReadAll(body)
	b.mu.Lock()
	delete(b.readers, rc)
	b.mu.Unlock()
	// The body is read: a deadline a stop set in the meantime must not
	// reach the server's read that watches for the client leaving, which
	// would cancel the step. A body that failed keeps its deadline, so
	// that nothing more waits on that client.
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return data, err
}

// stop gives the bodies being read, and those to come, grace to arrive.
func (b *bodyReaders) stop(grace time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopping, b.grace = true, grace
	for rc := range b.readers {
		// A ResponseController's deadline is the connection's, which any
		// goroutine may set (net.Conn).
		_ = rc.SetReadDeadline(time.Now().Add(grace))
	}
}

// follow serves GET /events: the connector's KV events, one JSON object a
// line, from the moment of the request until the follower leaves or the
// server stops. A follower that falls behind by -events-lag-bytes, or
// takes longer than -events-write-timeout over an event, is dropped, its
// stream ended, so that no follower slows the data path or holds memory
// or a stop; it reconnects and rebuilds its view.
func (s *server) follow(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	f := s.events.subscribe(rc)
	if f == nil {
		http.Error(w, "kvserver: stopping", http.StatusServiceUnavailable)
		return
	}
	slow := false
	defer func() { s.events.unsubscribe(f, slow) }()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	if !f.arm(s.lim.EventsWriteTimeout) || rc.Flush() != nil {
		return
	}
	for {
		ev, ended := f.next()
		if ended {
			return
		}
		if ev == nil {
			select {
			case <-r.Context().Done():
				return
			case <-f.wake:
			}
			continue
		}
		line := ev.encoded()
		if !f.arm(s.lim.EventsWriteTimeout) {
			return
		}
		_, err := w.Write(line)
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			slow = errors.Is(err, os.ErrDeadlineExceeded)
			return
		}
		f.sent(ev)
	}
}

// plural says n things, as "1 request" or "3 requests".
func plural(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// zmqAddr writes a bound address as a ZeroMQ endpoint.
func zmqAddr(a net.Addr) string {
	if a.Network() == "unix" {
		return "ipc://" + a.String()
	}
	return a.Network() + "://" + a.String()
}
