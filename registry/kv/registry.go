package kv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/kvgen/kvgen/registry"
)

// Entry is one linked connector: a [registry.Plugin] of the KV connector
// contract. Its Name is the key [Config.Connector] selects it by, its
// Aliases such further keys as vLLM's names for it, and its Roles the
// roles it serves by their names ("scheduler", "worker"; nil for both).
type Entry = registry.Plugin[Factory]

// Registry is the KV connector contract's registry: the
// [registry.Table] of its connectors, which it creates for a role. It is
// immutable once built and safe for concurrent use; reads take no lock.
type Registry struct {
	table  *registry.Table[Factory]
	logger *slog.Logger
}

// NewRegistry returns the registry of the connectors t holds. Code that
// kvgen generates for a manifest of KV connectors calls it on the table
// it builds.
func NewRegistry(t *registry.Table[Factory]) *Registry {
	return &Registry{table: t}
}

// New builds a registry from entries, kept in the given order, as
// [registry.NewTable] builds a table: for connectors linked by hand
// rather than by a manifest, as tests link them.
func New(entries ...Entry) (*Registry, error) {
	t, err := registry.NewTable(entries...)
	if err != nil {
		return nil, err
	}
	return NewRegistry(t), nil
}

// MustNew is New that panics on error.
func MustNew(entries ...Entry) *Registry {
	r, err := New(entries...)
	if err != nil {
		panic(err)
	}
	return r
}

// Table returns the table of the registry's connectors.
func (r *Registry) Table() *registry.Table[Factory] { return r.table }

// WithLogger returns a registry with the same entries whose connectors log
// to l: Create hands it to every constructor through [Config.Logger], and
// records each creation there at Debug level. The entries are shared, not
// copied, so a host sets its logger once at start-up on the generated
// Registry variable:
//
//	reg := connectors.Registry.WithLogger(logger)
//
// A nil l means slog.Default() at the time of each creation, as for a
// registry without a logger. The registry WithLogger is called on is left
// as it was.
func (r *Registry) WithLogger(l *slog.Logger) *Registry {
	c := *r
	c.logger = l
	return &c
}

// log returns the logger set by WithLogger, or slog.Default().
func (r *Registry) log() *slog.Logger {
	if r.logger != nil {
		return r.logger
	}
	return slog.Default()
}

// Lookup returns the entry registered under name, which may be an alias.
// The entry's slices are shared with the registry and must not be modified.
func (r *Registry) Lookup(name string) (Entry, bool) { return r.table.Entry(name) }

// Names returns the primary names of all entries, sorted.
func (r *Registry) Names() []string { return r.table.Names() }

// Entries returns all entries in the order the manifest lists them, with
// module versions from the binary's build info.
func (r *Registry) Entries() []Entry { return r.table.Entries() }

// maxDepth bounds how deeply composite connectors may nest, so that a
// configuration that names itself fails instead of recursing forever.
const maxDepth = 8

// maxConnectors bounds the connectors one transfer config makes, a
// MultiConnector's children and theirs included: vLLM's MultiConnector
// composes two or three.
const maxConnectors = 64

// CreateScheduler creates the scheduler side of the connector that
// cfg.Connector names. It is Create for [RoleScheduler], with the result
// typed as the role's interface.
func (r *Registry) CreateScheduler(ctx context.Context, cfg Config) (Scheduler, error) {
	c, err := r.Create(ctx, cfg, RoleScheduler)
	if err != nil {
		return nil, err
	}
	return c.(Scheduler), nil // Create checked it
}

// CreateWorker creates the worker side of the connector that cfg.Connector
// names. It is Create for [RoleWorker], with the result typed as the role's
// interface.
func (r *Registry) CreateWorker(ctx context.Context, cfg Config) (Worker, error) {
	c, err := r.Create(ctx, cfg, RoleWorker)
	if err != nil {
		return nil, err
	}
	return c.(Worker), nil // Create checked it
}

// Create creates the connector that cfg.Connector names, for role. The
// result implements [Scheduler] for RoleScheduler and [Worker] for
// RoleWorker; [Registry.CreateScheduler] and [Registry.CreateWorker] return
// it as that interface. Errors name the connector; an unknown name is a
// [*registry.UnknownNameError], a role the entry does not serve wraps
// [ErrUnsupportedRole].
//
// ctx bounds the construction only (see [Factory]). The constructor gets
// the registry's logger through [Config.Logger], and a successful creation
// is recorded on it at Debug level.
func (r *Registry) Create(ctx context.Context, cfg Config, role Role) (Connector, error) {
	entry, ok := r.table.Entry(cfg.Connector)
	if !ok {
		return nil, r.unknown(cfg.Connector)
	}
	e := &entry
	if role != RoleScheduler && role != RoleWorker {
		return nil, fmt.Errorf("kv connector %q: invalid role %v", e.Name, role)
	}
	if !e.Serves(role.String()) {
		return nil, fmt.Errorf("kv connector %q: %w %s (it serves %s)", e.Name, ErrUnsupportedRole, role, strings.Join(e.Roles, ","))
	}
	if cfg.depth >= maxDepth {
		return nil, fmt.Errorf("kv connector %q (%s): composite connectors nested more than %d deep", e.Name, role, maxDepth)
	}
	// Depth bounds one branch, this the whole tree: composites of 20
	// children each, four deep, would make every save 160,000 saves.
	if cfg.created == nil {
		cfg.created = new(atomic.Int32)
	}
	if cfg.created.Add(1) > maxConnectors {
		return nil, fmt.Errorf("kv connector %q (%s): the transfer config makes more than %d connectors, composites' children included", e.Name, role, maxConnectors)
	}
	// Children that a composite creates through cfg.Registry() with this
	// cfg are one level deeper, whether or not the composite remembers to
	// say so: a connector that names itself fails instead of recursing.
	cfg.creator = r
	cfg.depth++
	// Records of the connector name it, so a host's log tells connectors
	// apart; a composite's children get their own.
	cfg.logger, cfg.entry, cfg.role = r.logger, e.Name, role
	c, err := e.Factory(ctx, cfg, role)
	if err != nil {
		// A constructor returning a concrete pointer type turns its nil
		// into a non-nil Connector; closing that would panic.
		if !isNil(c) {
			_ = c.Close()
		}
		return nil, fmt.Errorf("kv connector %q (%s): %w", e.Name, role, err)
	}
	if isNil(c) {
		return nil, fmt.Errorf("kv connector %q (%s): %s %w", e.Name, role, constructorName(e), ErrNilConnector)
	}
	if err := servesRole(c, role); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("kv connector %q (%s): %T %w", e.Name, role, c, err)
	}
	// Debug: a host prints nothing per connector unless it asks to.
	if logger := r.log(); logger.Enabled(ctx, slog.LevelDebug) {
		logger.LogAttrs(ctx, slog.LevelDebug, "kv connector created",
			slog.String("connector", e.Name),
			slog.String("engine_id", cfg.EngineID),
			slog.String("role", role.String()),
			slog.String("import", e.ImportPath))
	}
	return c, nil
}

// constructorName names the constructor as errors show it; entries built by
// hand rather than by kvgen may not say where it is.
func constructorName(e *Entry) string {
	if e.ImportPath == "" || e.Constructor == "" {
		return "the constructor"
	}
	return e.ImportPath + "." + e.Constructor
}

// Errors Create wraps.
var (
	// ErrUnsupportedRole: the entry does not serve the role asked for.
	ErrUnsupportedRole = errors.New("does not serve the role")
	// ErrNilConnector: the constructor returned neither a connector nor an error.
	ErrNilConnector = errors.New("returned a nil connector and no error")
	// ErrRoleInterface: the connector does not implement its role's interface.
	ErrRoleInterface = errors.New("does not implement the role's interface")
)

func servesRole(c Connector, role Role) error {
	switch role {
	case RoleScheduler:
		if _, ok := c.(Scheduler); !ok {
			return fmt.Errorf("%w kv.Scheduler", ErrRoleInterface)
		}
	case RoleWorker:
		if _, ok := c.(Worker); !ok {
			return fmt.Errorf("%w kv.Worker", ErrRoleInterface)
		}
	}
	return nil
}

// isNil reports whether c is nil, including a nil pointer in a non-nil
// interface, which a constructor returning a concrete type produces.
func isNil(c Connector) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return nilable(v.Kind()) && v.IsNil()
}

func (r *Registry) unknown(name string) error {
	err := r.table.Unknown(name)
	err.Noun, err.Hint = "kv connector", r.vllmHint(name)
	return err
}

// nilable reports whether values of kind k can be nil.
func nilable(k reflect.Kind) bool {
	switch k {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return true
	}
	return false
}
