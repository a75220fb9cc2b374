package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvgen/kvgen/registry"
)

// shutdownGrace bounds how long a stopping server waits for requests in
// flight.
const shutdownGrace = 30 * time.Second

// stepRequest is the body of POST /prefill and POST /decode.
type stepRequest struct {
	// ID identifies the request; a fresh one by default.
	ID string `json:"id"`
	// Prompt and Tokens make the prompt, as -prompt and -tokens do.
	Prompt string `json:"prompt"`
	Tokens int    `json:"tokens"`
}

// server is kvserver's serve mode: one engine, its connectors created at
// start, prefill and decode steps over HTTP, and what an operator watches.
type server struct {
	e        *engine
	log      *slog.Logger
	events   *eventHub
	inFlight prometheus.Gauge
	steps    *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	nextID   atomic.Uint64
}

// serve runs the server on listen until ctx ends or SIGTERM or SIGINT
// arrives, then stops taking connections and waits for the requests in
// flight. It prints the address it listens on first, so that port 0 can be
// asked for.
func serve(ctx context.Context, e *engine, listen string, stdout io.Writer) error {
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
	s := &server{
		e:        e,
		log:      e.log,
		events:   newEventHub(),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvserver_requests_in_flight", Help: "Prefill and decode requests being served."}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvserver_steps_total", Help: "Prefill and decode steps served, by step and outcome."},
			[]string{"step", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvserver_prompt_tokens_total", Help: "Prompt tokens of decode steps, by whether their KV was loaded or recomputed."},
			[]string{"source"}),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.inFlight, s.steps, s.tokens, &statsCollector{connector: e.cfg.Connector, worker: w})
	if r, ok := w.(registry.StatsReporter); ok {
		r.KVStats() // connectors count from the first read: from now on
	}
	if r, ok := w.(registry.EventReporter); ok {
		r.ReportEvents(s.events.publish)
		defer r.ReportEvents(nil)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /events", s.follow)
	mux.HandleFunc("POST /prefill", s.step)
	mux.HandleFunc("POST /decode", s.step)

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kvserver: serving through %s on http://%s\n", registry.Quote(e.cfg.Connector), ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(e.log.Handler(), slog.LevelWarn)}
	// Followers of /events stream until they leave: a shutdown ends their
	// streams, or it would wait for them forever.
	srv.RegisterOnShutdown(s.events.close)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	s.log.Info("stopping: draining requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// step serves POST /prefill and POST /decode: the JSON body names the
// prompt, the answer is the report kvserver prints with -json.
func (s *server) step(w http.ResponseWriter, r *http.Request) {
	s.inFlight.Inc()
	defer s.inFlight.Dec()
	name := r.URL.Path[1:]
	var body stepRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		s.steps.WithLabelValues(name, "bad_request").Inc()
		http.Error(w, "kvserver: request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if body.Prompt == "" {
		body.Prompt = "The quick brown fox jumps over the lazy dog"
	}
	if body.Tokens == 0 {
		body.Tokens = 100
	}
	if body.Tokens < 0 || body.Tokens > 1<<20 {
		s.steps.WithLabelValues(name, "bad_request").Inc()
		http.Error(w, "kvserver: tokens: want from 1 to 1048576", http.StatusBadRequest)
		return
	}
	if body.ID == "" {
		body.ID = fmt.Sprintf("req-%d", s.nextID.Add(1))
	}
	req := &registry.Request{ID: body.ID, PromptTokens: tokenize(body.Prompt, body.Tokens)}
	var report any
	var err error
	if name == "prefill" {
		report, err = s.e.prefill(r.Context(), req)
	} else {
		var d *decodeReport
		if d, err = s.e.decode(r.Context(), req); err == nil {
			s.tokens.WithLabelValues("loaded").Add(float64(d.Loaded))
			s.tokens.WithLabelValues("recomputed").Add(float64(d.Recomputed))
		}
		report = d
	}
	if err != nil {
		s.steps.WithLabelValues(name, "error").Inc()
		status := http.StatusInternalServerError
		if errors.Is(err, errWrongData) {
			status = http.StatusBadGateway
		}
		http.Error(w, "kvserver: "+err.Error(), status)
		return
	}
	s.steps.WithLabelValues(name, "ok").Inc()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(report)
}

// follow serves GET /events: the connector's KV events, one JSON object a
// line, from the moment of the request until the follower leaves or the
// server stops. A follower that falls behind by eventBuffer events is
// dropped, its stream ended, so that no follower slows the data path; it
// reconnects and rebuilds its view.
func (s *server) follow(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "kvserver: streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch, closed := s.events.subscribe()
	if closed {
		http.Error(w, "kvserver: stopping", http.StatusServiceUnavailable)
		return
	}
	defer s.events.unsubscribe(ch)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case e, ok := <-ch:
			if !ok {
				return
			}
			if err := enc.Encode(e); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// eventBuffer is how many events a follower may lag behind.
const eventBuffer = 4096

// eventHub hands the connector's events to every follower.
type eventHub struct {
	mu     sync.Mutex
	subs   map[chan registry.KVEvent]bool
	closed bool
}

func newEventHub() *eventHub { return &eventHub{subs: map[chan registry.KVEvent]bool{}} }

func (h *eventHub) subscribe() (chan registry.KVEvent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, true
	}
	ch := make(chan registry.KVEvent, eventBuffer)
	h.subs[ch] = true
	return ch, false
}

func (h *eventHub) unsubscribe(ch chan registry.KVEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[ch] {
		delete(h.subs, ch)
		close(ch)
	}
}

// publish is the connector's event function: it never blocks.
func (h *eventHub) publish(e registry.KVEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- e:
		default: // too far behind: end its stream
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// close ends every stream and refuses new followers.
func (h *eventHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}
