package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// MultiConnectorName is the name vLLM gives its composite connector; use it
// in connectors.yaml for [NewMultiConnector] so vLLM configs carry over.
const MultiConnectorName = "MultiConnector"

// multiConstructor is NewMultiConnector's name, as a manifest names it.
const multiConstructor = "NewMultiConnector"

// IsMultiConnector reports whether a manifest entry whose constructor is
// importPath.constructor (constructor "" for the one its package marks)
// links [NewMultiConnector], kvgen's MultiConnector, whose children a
// transfer config lists. kvgen build -for does not call it: it reads the
// same answer from [Factory]'s //kvgen:select line.
func IsMultiConnector(importPath, constructor string) bool {
	return importPath == registryImport && (constructor == "" || constructor == multiConstructor)
}

type multiOptions struct {
	// vLLM's MultiConnector composes two or three; 64 leaves room.
	Connectors []map[string]any `json:"connectors" min:"1" max:"64"`
}

// NewMultiConnector creates vLLM's MultiConnector, which composes other
// linked connectors: it loads from the first child that has the tokens and
// saves to all. The children are listed in the extra setting "connectors",
// each a transfer config object such as {"kv_connector": NAME,
// "kv_connector_extra_config": {...}} whose unset keys take the parent's
// values, and are built through the same registry. It must be created
// through [Registry.Create].
func NewMultiConnector(ctx context.Context, cfg Config, role Role) (Connector, error) {
	r := cfg.Registry()
	if r == nil {
		return nil, errors.New("MultiConnector must be created through Registry.Create")
	}
	// Every child is checked before any is created, so that one run
	// reports every bad child and no store is opened for nothing.
	children, childErrs, err := multiChildren(cfg)
	if err != nil {
		return nil, err
	}
	var problems Problems
	for i, ccfg := range children {
		if childErrs[i] != nil {
			problems.Add(childErrs[i])
			continue
		}
		if e, ok := r.Lookup(ccfg.Connector); !ok {
			problems.Add(fmt.Errorf("connectors[%d]: %w", i, r.unknown(ccfg.Connector)))
		} else if !e.Serves(role.String()) {
			problems.Add(fmt.Errorf("connectors[%d]: kv connector %q: %w %s (it serves %s)", i, e.Name, ErrUnsupportedRole, role, strings.Join(e.Roles, ",")))
		}
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	m := &multi{logger: cfg.Logger()}
	for i, ccfg := range children {
		c, err := r.Create(ctx, ccfg, role)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("connectors[%d]: %w", i, err)
		}
		m.names = append(m.names, ccfg.Connector)
		m.children = append(m.children, c)
	}
	if role == RoleScheduler {
		return &multiScheduler{m}, nil
	}
	return &multiWorker{m}, nil
}

// MultiChildren returns the configs of the connectors that cfg, a
// MultiConnector's config, lists in its extra setting "connectors", each
// parsed as a transfer config whose unset keys take cfg's values, as
// NewMultiConnector parses them. A child whose config is wrong has an empty
// Connector in the result, and the error says why; the result is nil when
// the list itself is missing or wrong.
func MultiChildren(cfg Config) ([]Config, error) {
	children, errs, err := multiChildren(cfg)
	if err != nil {
		return nil, err
	}
	var problems Problems
	for _, err := range errs {
		if err != nil {
			problems.Add(err)
		}
	}
	return children, problems.Err()
}

// multiChildren is MultiChildren with each child's error at its index.
func multiChildren(cfg Config) ([]Config, []error, error) {
	var opts multiOptions
	if err := DecodeExtra(cfg.Extra, &opts); err != nil {
		return nil, nil, err
	}
	if len(opts.Connectors) == 0 {
		return nil, nil, errors.New(`kv_connector_extra_config: "connectors" must list at least one connector`)
	}
	children := make([]Config, len(opts.Connectors))
	errs := make([]error, len(opts.Connectors))
	for i, raw := range opts.Connectors {
		// A child is a transfer config of its own, as in vLLM, whose
		// unset values are the parent's.
		what := fmt.Sprintf("kv_connector_extra_config: connectors[%d]", i)
		data, err := json.Marshal(raw)
		if err != nil {
			errs[i] = fmt.Errorf("%s: %w", what, err)
			continue
		}
		if children[i], err = parseTransferConfig(what, data, cfg); err != nil {
			children[i], errs[i] = Config{}, err
		}
	}
	return children, errs, nil
}

type multi struct {
	names     []string
	children  []Connector
	logger    *slog.Logger
	closeOnce sync.Once
}

// Close closes every child; as the contract asks, only the first call
// reports their errors.
func (m *multi) Close() error {
	var err error
	m.closeOnce.Do(func() {
		var errs []error
		for i, c := range m.children {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", m.names[i], err))
			}
		}
		err = errors.Join(errs...)
	})
	return err
}

// each calls f on every child, joining their errors.
func (m *multi) each(f func(Connector) error) error {
	var errs []error
	for i, c := range m.children {
		if err := f(c); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.names[i], err))
		}
	}
	return errors.Join(errs...)
}

type multiScheduler struct{ *multi }

// MatchedTokens returns the match of the first child that has any. A child
// that fails is passed over, so one broken store does not stop the others;
// its error is returned only if no child matched.
func (m *multiScheduler) MatchedTokens(ctx context.Context, req *Request, numComputed int) (int, error) {
	var errs []error
	for i, c := range m.children {
		n, err := c.(Scheduler).MatchedTokens(ctx, req, numComputed)
		if err != nil {
			m.logger.WarnContext(ctx, "kv connector lookup failed", "child", m.names[i], "request", req.ID, "error", err)
			errs = append(errs, fmt.Errorf("%s: %w", m.names[i], err))
			continue
		}
		if n > 0 {
			return n, nil
		}
	}
	return 0, errors.Join(errs...)
}

func (m *multiScheduler) AfterAlloc(ctx context.Context, req *Request, numExternal int) error {
	return m.each(func(c Connector) error { return c.(Scheduler).AfterAlloc(ctx, req, numExternal) })
}

func (m *multiScheduler) RequestFinished(ctx context.Context, req *Request) error {
	return m.each(func(c Connector) error { return c.(Scheduler).RequestFinished(ctx, req) })
}

type multiWorker struct{ *multi }

// SaveLayer saves to every child, so any of them can serve a later load.
func (m *multiWorker) SaveLayer(ctx context.Context, req *Request, layer string, numTokens int, kv []byte) error {
	return m.each(func(c Connector) error { return c.(Worker).SaveLayer(ctx, req, layer, numTokens, kv) })
}

// LoadLayer loads from the first child that has the layer.
func (m *multiWorker) LoadLayer(ctx context.Context, req *Request, layer string, numTokens int) ([]byte, error) {
	return m.AppendLayer(ctx, req, layer, numTokens, nil)
}

// AppendLayer loads into dst from the first child that has the layer, with
// the child's own AppendLayer where it has one.
func (m *multiWorker) AppendLayer(ctx context.Context, req *Request, layer string, numTokens int, dst []byte) ([]byte, error) {
	var errs []error
	for i, c := range m.children {
		kv, err := AppendLayer(ctx, c.(Worker), req, layer, numTokens, dst)
		if err == nil {
			return kv, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m.names[i], err))
	}
	err := errors.Join(errs...)
	if !errors.Is(err, ErrMiss) {
		err = fmt.Errorf("%w: %w", ErrMiss, err)
	}
	return dst, err
}

func (m *multiWorker) WaitForSave(ctx context.Context) error {
	return m.each(func(c Connector) error { return c.(Worker).WaitForSave(ctx) })
}

// Finished reports a request as sent (or received) once every child does.
func (m *multiWorker) Finished(ctx context.Context, finished []string) (sent, received []string, err error) {
	sentBy := map[string]int{}
	recvBy := map[string]int{}
	// A child that reports an id twice still counts once.
	count := func(by map[string]int, ids []string) {
		for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
			by[id]++
		}
	}
	err = m.each(func(c Connector) error {
		s, r, err := c.(Worker).Finished(ctx, finished)
		count(sentBy, s)
		count(recvBy, r)
		return err
	})
	all := func(by map[string]int) []string {
		var ids []string
		for id, n := range by {
			if n == len(m.children) {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		return ids
	}
	return all(sentBy), all(recvBy), err
}
