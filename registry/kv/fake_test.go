package kv_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/kvgen/kvgen/registry/kv"
)

// kvStore is the backend a fake connector talks to: a map of saved layers
// shared by the scheduler and the worker created for one entry, as a remote
// store is shared by the two sides of a real connector.
type kvStore struct {
	mu       sync.Mutex
	layers   map[string][]byte    // prefix hash + "/" + layer
	prefixes map[kv.BlockHash]int // saved prefix -> its length in tokens
	created  []createCall
	closed   int
}

// createCall records what a factory was called with.
type createCall struct {
	role    kv.Role
	cfg     kv.Config
	creator *kv.Registry
}

func newKVStore() *kvStore {
	return &kvStore{layers: map[string][]byte{}, prefixes: map[kv.BlockHash]int{}}
}

func (s *kvStore) calls() []createCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.created)
}

func (s *kvStore) closes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *kvStore) has(h kv.BlockHash, layer string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.layers[h.String()+"/"+layer]
	return ok
}

// storeOptions are the fake connector's kv_connector_extra_config.
type storeOptions struct {
	// FailLookup makes MatchedTokens fail, as an unreachable store does.
	FailLookup bool `json:"fail_lookup"`
	// Pending lists requests whose sends have not completed.
	Pending []string `json:"pending"`
	// Repeat makes Finished report every request twice.
	Repeat bool `json:"repeat"`
	// Timeout is parsed to show that typed options work; it is unused.
	Timeout kv.Duration `json:"timeout"`
}

// storeConn is a fake connector over a kvStore; it serves both roles.
type storeConn struct {
	st        *kvStore
	prefixes  kv.Prefixes
	opts      storeOptions
	closeOnce sync.Once
}

// storeFactory returns a Factory whose connectors share st.
func storeFactory(st *kvStore) kv.Factory {
	return func(_ context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
		var opts storeOptions
		if err := kv.DecodeExtra(cfg.Extra, &opts); err != nil {
			return nil, err
		}
		st.mu.Lock()
		st.created = append(st.created, createCall{role: role, cfg: cfg, creator: cfg.Registry()})
		st.mu.Unlock()
		// Tests about creation leave the block size out.
		if cfg.BlockSize == 0 {
			cfg.BlockSize = kv.DefaultBlockSize
		}
		prefixes, err := cfg.Prefixes()
		if err != nil {
			return nil, err
		}
		return &storeConn{st: st, prefixes: prefixes, opts: opts}, nil
	}
}

var errUnreachable = errors.New("store unreachable")

func (c *storeConn) MatchedTokens(_ context.Context, req *kv.Request, numComputed int) (int, error) {
	if c.opts.FailLookup {
		return 0, errUnreachable
	}
	hashes := c.prefixes.Hashes(req.PromptTokens)
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	for i := len(hashes) - 1; i >= 0; i-- {
		if n, ok := c.st.prefixes[hashes[i]]; ok && n > numComputed {
			return n - numComputed, nil
		}
	}
	return 0, nil
}

func (c *storeConn) AfterAlloc(context.Context, *kv.Request, int) error { return nil }

func (c *storeConn) RequestFinished(context.Context, *kv.Request) error { return nil }

func (c *storeConn) SaveLayer(_ context.Context, req *kv.Request, layer string, numTokens int, kvData []byte) error {
	h, err := c.prefixes.Hash(req.PromptTokens, numTokens)
	if err != nil {
		return err
	}
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	c.st.layers[h.String()+"/"+layer] = slices.Clone(kvData)
	c.st.prefixes[h] = numTokens
	return nil
}

func (c *storeConn) LoadLayer(_ context.Context, req *kv.Request, layer string, numTokens int) ([]byte, error) {
	h, err := c.prefixes.Hash(req.PromptTokens, numTokens)
	if err != nil {
		return nil, err
	}
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	kvData, ok := c.st.layers[h.String()+"/"+layer]
	if !ok {
		return nil, fmt.Errorf("layer %s of %d tokens: %w", layer, numTokens, kv.ErrMiss)
	}
	return slices.Clone(kvData), nil
}

func (c *storeConn) WaitForSave(context.Context) error { return nil }

func (c *storeConn) Finished(_ context.Context, finished []string) (sent, received []string, err error) {
	for _, id := range finished {
		if !slices.Contains(c.opts.Pending, id) {
			sent = append(sent, id)
		}
	}
	received = slices.Clone(finished)
	if c.opts.Repeat {
		sent = append(sent, sent...)
		received = append(received, received...)
	}
	return sent, received, nil
}

// Close dereferences c, so closing a nil *storeConn panics, as it would for
// most real connectors.
func (c *storeConn) Close() error {
	c.closeOnce.Do(func() {
		c.st.mu.Lock()
		c.st.closed++
		c.st.mu.Unlock()
	})
	return nil
}

// closeOnly implements Connector and neither role interface.
type closeOnly struct{ closed bool }

func (c *closeOnly) Close() error { c.closed = true; return nil }

// recorder is a slog.Handler that keeps every record it is given, with
// the attributes its loggers were given by With.
type recorder struct {
	level slog.Level
	mu    *sync.Mutex
	recs  *[]slog.Record
	with  []slog.Attr
}

func newRecorder(level slog.Level) *recorder {
	return &recorder{level: level, mu: new(sync.Mutex), recs: new([]slog.Record)}
}

func (h *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r = r.Clone()
	r.AddAttrs(h.with...)
	*h.recs = append(*h.recs, r)
	return nil
}

func (h *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.with = append(slices.Clone(h.with), as...)
	return &c
}

func (h *recorder) WithGroup(string) slog.Handler { return h }

func (h *recorder) records() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(*h.recs)
}

// attrs returns a record's attributes as strings by key.
func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}
