// Package conformance is the test suite every KV connector should pass:
// it serves connector authors. A
// connector's own tests call [Run] with its factory:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, mypkg.New, conformance.Options{
//			Extra: func(t testing.TB) map[string]any {
//				return map[string]any{"path": t.TempDir()}
//			},
//		})
//	}
//
// The suite checks what the engine relies on and what a connector's own
// tests tend to miss: byte-exact round trips per layer, misses that never
// return data, chained prefix keys, block-aligned matches that honour the
// computed tokens, slices that are not shared with the caller, loads into
// the caller's buffer for a [kv.LayerAppender], concurrent use,
// idempotent Close, rejected unknown settings, and models kept apart:
// engines of two models sharing one store never see each other's KV. It
// checks each optional interface a connector implements and skips the
// others: stats that add up to what the suite did
// ([kv.StatsReporter]), events that match its saves and, replayed into
// an index of blocks as a router does, give what loads
// ([kv.EventReporter], [kv.RemovalReporter]), and the blocks a load of damaged KV reports
// as failed ([kv.LoadError], with [Options.Damage]). Run it with
// -race.
package conformance

import (
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// Options configures Run.
type Options struct {
	// Extra returns the kv_connector_extra_config for one store. Run calls
	// it once per subtest and creates the scheduler and the worker side
	// from the same settings, so they must share one store (a fresh
	// directory, a fresh key prefix...). Nil means no settings.
	Extra func(t testing.TB) map[string]any
	// Roles the connector serves, by name ("scheduler", "worker"), as
	// [kv.Entry] lists them; nil means both.
	Roles []string
	// Damage, if set, breaks the stored KV of one layer of the prefix with
	// hash prefix in the store extra configures, as a torn write or a bad
	// disk would, so that the suite checks the [kv.LoadError] a load
	// of it returns. Nil skips that check.
	Damage func(t testing.TB, extra map[string]any, prefix kv.BlockHash, layer string)
	// Remove, if set, removes the stored KV of one layer of the prefix
	// with hash prefix in the store extra configures, as the store does
	// by itself (an eviction, an expiry), so that the suite checks a
	// connector that reports removals ([kv.RemovalReporter]) reports it.
	// Nil leaves removals unchecked.
	Remove func(t testing.TB, extra map[string]any, prefix kv.BlockHash, layer string)
}

// name is the registry key the suite gives the connector under test.
const name = "under-test"

// blockSize is the block size of most subtests: vLLM's default.
const blockSize = kv.DefaultBlockSize

// layerNames are the layers of the suite's model, named the way vLLM names
// attention layers.
var layerNames = []string{
	"model.layers.0.self_attn",
	"model.layers.1.self_attn",
	"model.layers.2.self_attn",
}

// Run runs the conformance suite against factory as subtests of t.
func Run(t *testing.T, factory kv.Factory, opts Options) {
	t.Helper()
	reg, err := kv.New(kv.Entry{
		Name:        name,
		ImportPath:  "conformance",
		Constructor: "factory",
		Roles:       opts.Roles,
		Factory:     factory,
	})
	require.NoError(t, err)
	s := &suite{
		// What connectors log is not under test here, only what they do.
		reg:  reg.WithLogger(slog.New(slog.DiscardHandler)),
		opts: opts,
		// A random salt keeps the prompts of one run apart from those of
		// earlier runs, for stores that outlive the test process.
		salt: rand.Uint64(),
	}
	t.Run("RolesServed", s.rolesServed)
	t.Run("BothRolesInOneProcess", s.bothRolesInOneProcess)
	t.Run("RoundTrip", func(t *testing.T) { s.roundTrip(t, blockSize) })
	t.Run("RoundTripBlockSize4", func(t *testing.T) { s.roundTrip(t, 4) })
	t.Run("Miss", s.miss)
	t.Run("MatchedTokens", s.matchedTokens)
	t.Run("SaveRejectsBadPrefix", s.saveRejectsBadPrefix)
	t.Run("NoSharedSlices", s.noSharedSlices)
	t.Run("AppendLayer", s.appendLayer)
	t.Run("Concurrent", s.concurrent)
	t.Run("CloseIdempotent", s.closeIdempotent)
	t.Run("UnknownSetting", s.unknownSetting)
	t.Run("IsolatedByModel", s.isolatedByModel)
	t.Run("Finished", s.finished)
	// Optional interfaces: each is checked where implemented, and skipped
	// where not.
	t.Run("StatsAddUp", s.statsAddUp)
	t.Run("EventsMatchSaves", s.eventsMatchSaves)
	t.Run("EventsReplayToWhatLoads", s.eventsReplayToWhatLoads)
	t.Run("LoadErrorsNamed", s.loadErrorsNamed)
}

// suite holds what every subtest shares.
type suite struct {
	reg  *kv.Registry
	opts Options
	salt uint64
}

// pair is the two sides of one store. A side whose role the connector does
// not serve is nil.
type pair struct {
	sched  kv.Scheduler
	worker kv.Worker
}

// extra returns one store's settings.
func (s *suite) extra(t *testing.T) map[string]any {
	t.Helper()
	if s.opts.Extra == nil {
		return nil
	}
	return s.opts.Extra(t)
}

// model is the model of every subtest but IsolatedByModel.
const model = "conformance/model"

// config returns the configuration the suite creates connectors from. Each
// connector gets its own copy of extra, as separate processes would.
func (s *suite) config(bs int, extra map[string]any) kv.Config {
	return kv.Config{
		Model:             model,
		Connector:         name,
		EngineID:          "conformance-engine",
		KVRole:            kv.KVBoth,
		BlockSize:         bs,
		LayerNames:        layerNames,
		LoadFailurePolicy: kv.PolicyRecompute,
		Extra:             maps.Clone(extra),
	}
}

// create creates the connector for role through the registry, so that its
// role-interface check runs, and closes it when t ends.
func (s *suite) create(t *testing.T, bs int, extra map[string]any, role kv.Role) kv.Connector {
	t.Helper()
	return s.createFrom(t, s.config(bs, extra), role)
}

// createFrom creates the connector for role from cfg through the registry,
// and closes it when t ends.
func (s *suite) createFrom(t *testing.T, cfg kv.Config, role kv.Role) kv.Connector {
	t.Helper()
	c, err := s.reg.Create(t.Context(), cfg, role)
	return keep(t, role, c, err)
}

// scheduler creates the scheduler side from cfg, as a host does, and
// closes it when t ends.
func (s *suite) scheduler(t *testing.T, cfg kv.Config) kv.Scheduler {
	t.Helper()
	c, err := s.reg.CreateScheduler(t.Context(), cfg)
	return keep(t, kv.RoleScheduler, c, err)
}

// worker creates the worker side from cfg, as a host does, and closes it
// when t ends.
func (s *suite) worker(t *testing.T, cfg kv.Config) kv.Worker {
	t.Helper()
	c, err := s.reg.CreateWorker(t.Context(), cfg)
	return keep(t, kv.RoleWorker, c, err)
}

// keep fails t if creating the role's side failed, and closes the side
// when t ends.
func keep[C kv.Connector](t *testing.T, role kv.Role, c C, err error) C {
	t.Helper()
	require.NoError(t, err, "creating the %s side", role)
	t.Cleanup(func() { assert.NoError(t, c.Close(), "Close of the %s side", role) })
	return c
}

// open creates both sides of one fresh store.
func (s *suite) open(t *testing.T, bs int) pair {
	t.Helper()
	return s.openFrom(t, s.config(bs, s.extra(t)))
}

// openFrom creates both sides from cfg.
func (s *suite) openFrom(t *testing.T, cfg kv.Config) pair {
	t.Helper()
	var p pair
	if s.serves(kv.RoleScheduler) {
		p.sched = s.scheduler(t, cfg)
	}
	if s.serves(kv.RoleWorker) {
		p.worker = s.worker(t, cfg)
	}
	return p
}

func (s *suite) serves(r kv.Role) bool {
	return s.opts.Roles == nil || slices.Contains(s.opts.Roles, r.String())
}

// roles are the roles the connector serves, in documented order.
func (s *suite) roles() []kv.Role {
	var out []kv.Role
	for _, r := range kv.Roles() {
		if s.serves(r) {
			out = append(out, r)
		}
	}
	return out
}

// needWorker skips a subtest that has to store KV.
func (s *suite) needWorker(t *testing.T) {
	t.Helper()
	if !s.serves(kv.RoleWorker) {
		t.Skip("the connector does not serve the worker role")
	}
}
