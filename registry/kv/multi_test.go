package kv_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// multiFixture is a registry holding MultiConnector and three fake stores.
type multiFixture struct {
	local, remote, flaky *kvStore
	log                  *recorder
	reg                  *kv.Registry
}

func newMultiFixture() *multiFixture {
	f := &multiFixture{local: newKVStore(), remote: newKVStore(), flaky: newKVStore(), log: newRecorder(slog.LevelDebug)}
	lookupOnly := kv.Entry{Name: "lookup", Roles: []string{"scheduler"}, Factory: storeFactory(newKVStore())}
	f.reg = kv.MustNew(
		kv.Entry{
			Name:        kv.MultiConnectorName,
			ImportPath:  "github.com/kvgen/kvgen/registry",
			Constructor: "NewMultiConnector",
			Factory:     kv.NewMultiConnector,
		},
		kv.Entry{Name: "local", Factory: storeFactory(f.local)},
		kv.Entry{Name: "remote", Aliases: []string{"RemoteConnector"}, Factory: storeFactory(f.remote)},
		kv.Entry{Name: "flaky", Factory: storeFactory(f.flaky)},
		lookupOnly,
	).WithLogger(slog.New(f.log))
	return f
}

func (f *multiFixture) createErr(t *testing.T, config string, role kv.Role) (kv.Connector, error) {
	t.Helper()
	cfg, err := kv.ParseTransferConfig([]byte(config))
	require.NoError(t, err)
	c, err := f.reg.Create(t.Context(), cfg, role)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

func (f *multiFixture) create(t *testing.T, config string, role kv.Role) kv.Connector {
	t.Helper()
	c, err := f.createErr(t, config, role)
	require.NoError(t, err)
	return c
}

// multiOf is the transfer config of a MultiConnector over children, with
// blocks of 4 tokens.
func multiOf(children ...string) string {
	return `{"kv_connector": "MultiConnector", "engine_id": "decode-0", "block_size": 4,
		"kv_connector_extra_config": {"connectors": [` + strings.Join(children, ", ") + `]}}`
}

var prompt = &kv.Request{ID: "r1", PromptTokens: []uint32{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}}

func TestMultiConnectorBuildsChildrenThroughRegistry(t *testing.T) {
	f := newMultiFixture()
	// As vLLM users write it: each child is a transfer config of its own.
	c := f.create(t, `{
		"kv_connector": "MultiConnector", "kv_role": "kv_both", "engine_id": "decode-0",
		"block_size": 4, "kv_load_failure_policy": "fail",
		"kv_connector_extra_config": {"connectors": [
			{"kv_connector": "local", "kv_role": "kv_both"},
			{"kv_connector": "RemoteConnector", "kv_role": "kv_consumer", "engine_id": "decode-0-remote",
			 "kv_connector_extra_config": {"timeout": "2s"}}
		]}}`, kv.RoleWorker)
	assert.Implements(t, (*kv.Worker)(nil), c)

	local, remote := f.local.calls(), f.remote.calls()
	require.Len(t, local, 1)
	require.Len(t, remote, 1)
	assert.Same(t, f.reg, local[0].creator, "children are created through the same registry")
	assert.Equal(t, kv.RoleWorker, local[0].role)
	assert.Equal(t, "local", local[0].cfg.Connector)
	assert.Empty(t, local[0].cfg.Extra)
	assert.Equal(t, "decode-0", local[0].cfg.EngineID, "unset values are the parent's")
	assert.Equal(t, 4, local[0].cfg.BlockSize)
	assert.Equal(t, kv.PolicyFail, local[0].cfg.LoadFailurePolicy)
	assert.Equal(t, "RemoteConnector", remote[0].cfg.Connector)
	assert.Equal(t, kv.KVConsumer, remote[0].cfg.KVRole)
	assert.Equal(t, "decode-0-remote", remote[0].cfg.EngineID)
	assert.Equal(t, map[string]any{"timeout": "2s"}, remote[0].cfg.Extra)

	var created []string
	for _, r := range f.log.records() {
		created = append(created, attrs(r)["connector"])
	}
	assert.Equal(t, []string{"local", "remote", "MultiConnector"}, created)

	// A child logs to the host's logger under its own name.
	remote[0].cfg.Logger().Warn("child warning")
	recs := f.log.records()
	last := recs[len(recs)-1]
	assert.Equal(t, "child warning", last.Message)
	assert.Equal(t, map[string]string{"connector": "remote", "role": "worker"}, attrs(last))

	require.NoError(t, c.Close())
	assert.Equal(t, 1, f.local.closes())
	assert.Equal(t, 1, f.remote.closes())
	assert.NoError(t, c.Close(), "a second Close is allowed")
	assert.Equal(t, 1, f.local.closes())
}

func TestMultiConnectorChildrenServeTheParentsModel(t *testing.T) {
	f := newMultiFixture()
	cfg, err := kv.ParseTransferConfig([]byte(multiOf(`{"kv_connector": "local", "kv_port": "15000"}`, `{"kv_connector": "remote"}`)))
	require.NoError(t, err)
	cfg.Model = "org/model-a"
	c, err := f.reg.Create(t.Context(), cfg, kv.RoleWorker)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	local, remote := f.local.calls(), f.remote.calls()
	require.Len(t, local, 1)
	require.Len(t, remote, 1)
	assert.Equal(t, "org/model-a", local[0].cfg.Model, "the host sets the model once, for every child")
	assert.Equal(t, "org/model-a", remote[0].cfg.Model)
	assert.Equal(t, 15000, local[0].cfg.KVPort, "a child's own typed fields")
	assert.Equal(t, kv.DefaultKVPort, remote[0].cfg.KVPort, "unset: the parent's")
}

func TestMultiConnectorSavesToAllLoadsFromFirst(t *testing.T) {
	f := newMultiFixture()
	w := f.create(t, multiOf(`{"kv_connector": "local"}`, `{"kv_connector": "remote"}`), kv.RoleWorker).(kv.Worker)
	ctx := t.Context()

	require.NoError(t, w.SaveLayer(ctx, prompt, "layer.0", 8, []byte("both")))
	require.NoError(t, w.WaitForSave(ctx))
	p, err := kv.NewPrefixes("", 4)
	require.NoError(t, err)
	h, err := p.Hash(prompt.PromptTokens, 8)
	require.NoError(t, err)
	assert.True(t, f.local.has(h, "layer.0"), "saved to the first child")
	assert.True(t, f.remote.has(h, "layer.0"), "saved to the second child")

	// Only the second child has layer.1: it is loaded from there.
	remote, err := f.reg.Create(ctx, kv.Config{Connector: "remote", BlockSize: 4}, kv.RoleWorker)
	require.NoError(t, err)
	require.NoError(t, remote.(kv.Worker).SaveLayer(ctx, prompt, "layer.1", 8, []byte("remote only")))
	kvData, err := w.LoadLayer(ctx, prompt, "layer.1", 8)
	require.NoError(t, err)
	assert.Equal(t, []byte("remote only"), kvData)

	// Both have layer.2: the first child wins.
	local, err := f.reg.Create(ctx, kv.Config{Connector: "local", BlockSize: 4}, kv.RoleWorker)
	require.NoError(t, err)
	require.NoError(t, local.(kv.Worker).SaveLayer(ctx, prompt, "layer.2", 8, []byte("from local")))
	require.NoError(t, remote.(kv.Worker).SaveLayer(ctx, prompt, "layer.2", 8, []byte("from remote")))
	kvData, err = w.LoadLayer(ctx, prompt, "layer.2", 8)
	require.NoError(t, err)
	assert.Equal(t, []byte("from local"), kvData)

	// Nobody has it: a miss that names every child.
	_, err = w.LoadLayer(ctx, prompt, "layer.9", 8)
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.EqualError(t, err, "local: layer layer.9 of 8 tokens: kv not stored\n"+
		"remote: layer layer.9 of 8 tokens: kv not stored")
}

func TestMultiConnectorMatchedTokens(t *testing.T) {
	f := newMultiFixture()
	ctx := t.Context()
	s := f.create(t, multiOf(`{"kv_connector": "local"}`, `{"kv_connector": "remote"}`), kv.RoleScheduler).(kv.Scheduler)

	n, err := s.MatchedTokens(ctx, prompt, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing stored anywhere")

	remote, err := f.reg.Create(ctx, kv.Config{Connector: "remote", BlockSize: 4}, kv.RoleWorker)
	require.NoError(t, err)
	require.NoError(t, remote.(kv.Worker).SaveLayer(ctx, prompt, "layer.0", 8, []byte("kv")))
	n, err = s.MatchedTokens(ctx, prompt, 0)
	require.NoError(t, err)
	assert.Equal(t, 8, n, "the second child has the tokens")
	n, err = s.MatchedTokens(ctx, prompt, 4)
	require.NoError(t, err)
	assert.Equal(t, 4, n, "tokens beyond those computed")

	// The first child that has any tokens wins, as in vLLM, even if a
	// later one has more.
	local, err := f.reg.Create(ctx, kv.Config{Connector: "local", BlockSize: 4}, kv.RoleWorker)
	require.NoError(t, err)
	require.NoError(t, local.(kv.Worker).SaveLayer(ctx, prompt, "layer.0", 4, []byte("kv")))
	n, err = s.MatchedTokens(ctx, prompt, 0)
	require.NoError(t, err)
	assert.Equal(t, 4, n)

	require.NoError(t, s.AfterAlloc(ctx, prompt, 4))
	require.NoError(t, s.RequestFinished(ctx, prompt))
}

func TestMultiConnectorPassesOverFailingChild(t *testing.T) {
	f := newMultiFixture()
	ctx := t.Context()
	s := f.create(t, multiOf(`{"kv_connector": "flaky", "kv_connector_extra_config": {"fail_lookup": true}}`,
		`{"kv_connector": "remote"}`), kv.RoleScheduler).(kv.Scheduler)

	// No child matches and one failed: the failure is the answer.
	n, err := s.MatchedTokens(ctx, prompt, 0)
	require.ErrorIs(t, err, errUnreachable)
	assert.EqualError(t, err, "flaky: store unreachable")
	assert.Zero(t, n)

	remote, err := f.reg.Create(ctx, kv.Config{Connector: "remote", BlockSize: 4}, kv.RoleWorker)
	require.NoError(t, err)
	require.NoError(t, remote.(kv.Worker).SaveLayer(ctx, prompt, "layer.0", 8, []byte("kv")))
	n, err = s.MatchedTokens(ctx, prompt, 0)
	require.NoError(t, err, "a failing child is passed over when another matches")
	assert.Equal(t, 8, n)

	// Each failure is logged to the registry's logger.
	var warned []map[string]string
	for _, r := range f.log.records() {
		if r.Level == slog.LevelWarn {
			assert.Equal(t, "kv connector lookup failed", r.Message)
			warned = append(warned, attrs(r))
		}
	}
	require.Len(t, warned, 2)
	assert.Equal(t, map[string]string{
		"connector": "MultiConnector", "role": "scheduler",
		"child": "flaky", "request": "r1", "error": "store unreachable",
	}, warned[1])
}

func TestMultiConnectorFinished(t *testing.T) {
	f := newMultiFixture()
	ctx := t.Context()
	w := f.create(t, multiOf(`{"kv_connector": "local", "kv_connector_extra_config": {"pending": ["r2"]}}`,
		`{"kv_connector": "remote"}`), kv.RoleWorker).(kv.Worker)
	sent, received, err := w.Finished(ctx, []string{"r3", "r1", "r2"})
	require.NoError(t, err)
	assert.Equal(t, []string{"r1", "r3"}, sent, "a request is sent once every child has sent it")
	assert.Equal(t, []string{"r1", "r2", "r3"}, received)

	// A child that reports a request twice does not stand in for another
	// child that has not reported it.
	w = f.create(t, multiOf(`{"kv_connector": "local", "kv_connector_extra_config": {"repeat": true}}`,
		`{"kv_connector": "remote", "kv_connector_extra_config": {"pending": ["r2"]}}`), kv.RoleWorker).(kv.Worker)
	sent, received, err = w.Finished(ctx, []string{"r1", "r2"})
	require.NoError(t, err)
	assert.Equal(t, []string{"r1"}, sent)
	assert.Equal(t, []string{"r1", "r2"}, received)
}

func TestMultiConnectorRejectsBadChildren(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		{
			name:   "unknown key in a child",
			config: multiOf(`{"kv_connector": "local"}`, `{"kv_conector": "remote"}`),
			want:   `kv connector "MultiConnector" (worker): kv_connector_extra_config: connectors[1]: unknown key "kv_conector" (did you mean "kv_connector"?)`,
		},
		{
			name:   "unknown key in a child's own settings",
			config: multiOf(`{"kv_connector": "local"}`, `{"kv_connector": "remote", "kv_connector_extra_config": {"timout": "1s"}}`),
			want: `kv connector "MultiConnector" (worker): connectors[1]: kv connector "remote" (worker): ` +
				`kv_connector_extra_config: unknown key "timout" (did you mean "timeout"?)`,
		},
		{
			name:   "bad value in a child",
			config: multiOf(`{"kv_connector": "local"}`, `{"kv_connector": "remote", "kv_role": "consumer"}`),
			want: `kv connector "MultiConnector" (worker): kv_connector_extra_config: connectors[1]: ` +
				`kv_role "consumer": want "kv_producer", "kv_consumer" or "kv_both"`,
		},
		{
			name:   "child without a name",
			config: multiOf(`{"kv_connector": "local"}`, `{"kv_role": "kv_both"}`),
			want:   `kv connector "MultiConnector" (worker): kv_connector_extra_config: connectors[1]: kv_connector is required`,
		},
		{
			name:   "unknown child",
			config: multiOf(`{"kv_connector": "local"}`, `{"kv_connector": "remot"}`),
			want: `kv connector "MultiConnector" (worker): connectors[1]: unknown kv connector "remot" (did you mean "remote" or "RemoteConnector"?); ` +
				`linked: MultiConnector, flaky, local, lookup, remote; to link another, add it to the manifest and regenerate`,
		},
		{
			name:   "child without the role",
			config: multiOf(`{"kv_connector": "local"}`, `{"kv_connector": "lookup"}`),
			want:   `kv connector "MultiConnector" (worker): connectors[1]: kv connector "lookup": does not serve the role worker (it serves scheduler)`,
		},
		{
			name:   "no children",
			config: multiOf(),
			want:   `kv connector "MultiConnector" (worker): kv_connector_extra_config: connectors has 0 entries: want from 1 to 64`,
		},
		{
			name:   "unknown setting",
			config: `{"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connector": [{"kv_connector": "local"}]}}`,
			want:   `kv connector "MultiConnector" (worker): kv_connector_extra_config: unknown key "connector" (did you mean "connectors"?)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newMultiFixture()
			_, err := f.createErr(t, tt.config, kv.RoleWorker)
			require.EqualError(t, err, tt.want)
			local := f.local.calls()
			assert.Equal(t, len(local), f.local.closes(), "children already created are closed")
		})
	}
}

func TestMultiConnectorReportsEveryBadChildBeforeCreatingAny(t *testing.T) {
	f := newMultiFixture()
	_, err := f.createErr(t, multiOf(
		`{"kv_connector": "local"}`,
		`{"kv_connector": "remot"}`,
		`{"kv_connector": "remote", "kv_port": "x"}`,
		`{"kv_connector": "lookup"}`,
		`{"kv_connector": "NixlConnector", "kv_connector_module_path": "nixl.module"}`,
	), kv.RoleWorker)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 4, err.Error())
	assert.Contains(t, lines[0], `connectors[1]: unknown kv connector "remot" (did you mean "remote"`)
	assert.Contains(t, lines[1], `connectors[2]: kv_port "x": want an integer`)
	assert.Contains(t, lines[2], `connectors[3]: kv connector "lookup": does not serve the role worker (it serves scheduler)`)
	assert.Contains(t, lines[3], `connectors[4]: kv_connector_module_path "nixl.module": a Go binary cannot load connectors at run time`)
	assert.Empty(t, f.local.calls(), "no child is created while any is bad")
	assert.Zero(t, f.local.closes())
}

// nestedMulti returns the settings of a MultiConnector whose only child is
// a MultiConnector, levels deep, around a local store.
func nestedMulti(levels int) map[string]any {
	extra := map[string]any{"connectors": []any{map[string]any{"kv_connector": "local"}}}
	for range levels {
		extra = map[string]any{"connectors": []any{
			map[string]any{"kv_connector": kv.MultiConnectorName, "kv_connector_extra_config": extra},
		}}
	}
	return extra
}

func TestMultiConnectorNestingIsBounded(t *testing.T) {
	f := newMultiFixture()
	cfg := kv.Config{Connector: kv.MultiConnectorName, BlockSize: 4}

	// Seven MultiConnectors around a store make eight levels: allowed.
	cfg.Extra = nestedMulti(6)
	c, err := f.reg.Create(t.Context(), cfg, kv.RoleWorker)
	require.NoError(t, err)
	require.NoError(t, c.Close())

	cfg.Extra = nestedMulti(7)
	_, err = f.reg.Create(t.Context(), cfg, kv.RoleWorker)
	want := strings.Repeat(`kv connector "MultiConnector" (worker): connectors[0]: `, 8) +
		`kv connector "local" (worker): composite connectors nested more than 8 deep`
	require.EqualError(t, err, want)
	assert.Equal(t, 1, f.local.closes(), "only the first, complete tree created a store")
}

// One transfer config makes at most 64 connectors in all: composites of
// many children, nested, would otherwise make every save thousands.
func TestMultiConnectorTreeIsBounded(t *testing.T) {
	f := newMultiFixture()
	leaves := func(n int) []any {
		var l []any
		for range n {
			l = append(l, map[string]any{"kv_connector": "local"})
		}
		return l
	}
	// Two MultiConnectors of 31 stores under one: 1 + 2 + 62 = 65.
	inner := map[string]any{"kv_connector": kv.MultiConnectorName, "kv_connector_extra_config": map[string]any{"connectors": leaves(31)}}
	cfg := kv.Config{Connector: kv.MultiConnectorName, BlockSize: 4, Extra: map[string]any{"connectors": []any{inner, inner}}}
	_, err := f.reg.Create(t.Context(), cfg, kv.RoleWorker)
	require.ErrorContains(t, err, "the transfer config makes more than 64 connectors, composites' children included")
	assert.Equal(t, len(f.local.calls()), f.local.closes(), "every store made before the bound was closed")

	// 1 + 2 + 60 = 63, and again: each Create counts its own tree.
	inner["kv_connector_extra_config"] = map[string]any{"connectors": leaves(30)}
	for range 2 {
		c, err := f.reg.Create(t.Context(), cfg, kv.RoleWorker)
		require.NoError(t, err)
		require.NoError(t, c.Close())
	}
}

func TestCompositeThatCreatesItselfFails(t *testing.T) {
	// A composite that passes its own config back to the registry would
	// recurse forever; Create counts the levels for it.
	var calls int
	loop := kv.Entry{Name: "loop", Factory: func(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
		calls++
		return cfg.Registry().Create(ctx, cfg, role)
	}}
	r := kv.MustNew(loop).WithLogger(quiet)
	_, err := r.Create(t.Context(), kv.Config{Connector: "loop"}, kv.RoleScheduler)
	require.EqualError(t, err, strings.Repeat(`kv connector "loop" (scheduler): `, 8)+
		`kv connector "loop" (scheduler): composite connectors nested more than 8 deep`)
	assert.Equal(t, 8, calls)
}

func TestMultiConnectorWithCyclicSettingsFails(t *testing.T) {
	f := newMultiFixture()
	extra := map[string]any{}
	extra["connectors"] = []any{map[string]any{"kv_connector": kv.MultiConnectorName, "kv_connector_extra_config": extra}}
	_, err := f.reg.Create(t.Context(), kv.Config{Connector: kv.MultiConnectorName, Extra: extra}, kv.RoleWorker)
	// encoding/json notices the cycle long before the nesting limit.
	assert.EqualError(t, err, `kv connector "MultiConnector" (worker): kv_connector_extra_config: connectors: `+
		`json: unsupported value: encountered a cycle via []interface {}`)
}

func TestNewMultiConnectorOutsideCreate(t *testing.T) {
	cfg := kv.Config{
		Connector: kv.MultiConnectorName,
		Extra:     map[string]any{"connectors": []any{map[string]any{"kv_connector": "local"}}},
	}
	c, err := kv.NewMultiConnector(t.Context(), cfg, kv.RoleWorker)
	assert.Nil(t, c)
	assert.EqualError(t, err, "MultiConnector must be created through Registry.Create")
}

func TestIsMultiConnector(t *testing.T) {
	assert.True(t, kv.IsMultiConnector("github.com/kvgen/kvgen/registry/kv", "NewMultiConnector"))
	assert.False(t, kv.IsMultiConnector("github.com/kvgen/kvgen/registry", "NewMultiConnector"))
	assert.False(t, kv.IsMultiConnector("github.com/kvgen/kvgen/registry/kv", "MultiChildren"))
}
