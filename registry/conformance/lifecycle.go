package conformance

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// rolesServed checks that each role the connector serves gets its role's
// interface. Create already refuses a connector that lacks it; the suite
// says so in its own words.
func (s *suite) rolesServed(t *testing.T) {
	extra := s.extra(t)
	for _, role := range s.roles() {
		c := s.create(t, blockSize, extra, role)
		switch role {
		case kv.RoleScheduler:
			assert.Implements(t, (*kv.Scheduler)(nil), c, "the scheduler side")
		case kv.RoleWorker:
			assert.Implements(t, (*kv.Worker)(nil), c, "the worker side")
		}
	}
}

// bothRolesInOneProcess follows vLLM's single-process executor: both sides
// live in one process at once, built worker first here, and closing one
// side must not take the store from under the other.
func (s *suite) bothRolesInOneProcess(t *testing.T) {
	if !s.serves(kv.RoleScheduler) || !s.serves(kv.RoleWorker) {
		t.Skip("the connector serves one role")
	}
	ctx := t.Context()
	extra := s.extra(t)
	w := s.worker(t, s.config(blockSize, extra))
	sched := s.scheduler(t, s.config(blockSize, extra))

	req := s.request(t, "prompt", 3*blockSize)
	require.NoError(t, saveLayers(ctx, w, req, 2*blockSize, 64, layerNames))
	n, err := sched.MatchedTokens(ctx, req, 0)
	require.NoError(t, err)
	assert.Equal(t, 2*blockSize, n, "the scheduler side must see what the worker side saved")

	require.NoError(t, sched.Close())
	assert.NoError(t, checkLayers(ctx, w, req, 2*blockSize, 64, layerNames),
		"the worker side must keep working after the scheduler side closed")
}

// closeIdempotent checks that a second Close returns nil.
func (s *suite) closeIdempotent(t *testing.T) {
	extra := s.extra(t)
	for _, role := range s.roles() {
		c := s.create(t, blockSize, extra, role)
		require.NoError(t, c.Close(), "first Close of the %s side", role)
		assert.NoError(t, c.Close(), "second Close of the %s side", role)
	}
}

// unknownSetting checks that a misspelt setting fails creation by name, as
// kv.DecodeExtra reports it, instead of being ignored.
func (s *suite) unknownSetting(t *testing.T) {
	extra := maps.Clone(s.extra(t))
	if extra == nil {
		extra = map[string]any{}
	}
	extra["no_such_setting"] = true
	for _, role := range s.roles() {
		c, err := s.reg.Create(t.Context(), s.config(blockSize, extra), role)
		if err == nil {
			assert.NoError(t, c.Close())
			t.Errorf("Create for the %s role accepted kv_connector_extra_config {\"no_such_setting\": true}: a connector must refuse settings it does not know, so that a typo in a deployment does not pass silently; decode the settings with kv.DecodeExtra, which does", role)
			continue
		}
		assert.ErrorContains(t, err, `unknown key "no_such_setting"`, "Create for the %s role: the error must name the unknown key, as kv.DecodeExtra's does", role)
	}
}

// finished checks Finished: over the calls of one engine, every request it
// reports as sent or received was passed to it as finished, and none is
// reported twice.
func (s *suite) finished(t *testing.T) {
	s.needWorker(t)
	ctx := t.Context()
	p := s.open(t, blockSize)
	saved := s.request(t, "saved", 2*blockSize)
	loaded := s.request(t, "loaded", 2*blockSize)
	idle := s.request(t, "idle", 2*blockSize)
	require.NoError(t, saveLayers(ctx, p.worker, saved, blockSize, 32, layerNames))
	require.NoError(t, saveLayers(ctx, p.worker, loaded, blockSize, 32, layerNames))
	require.NoError(t, checkLayers(ctx, p.worker, loaded, blockSize, 32, layerNames))

	passed := map[string]bool{}
	sentSeen := map[string]bool{}
	receivedSeen := map[string]bool{}
	record := func(call string, ids []string, seen map[string]bool, what string) {
		for _, id := range ids {
			assert.True(t, passed[id], "%s reported %q as %s, but it was never passed as finished", call, id, what)
			assert.False(t, seen[id], "%s reported %q as %s again", call, id, what)
			seen[id] = true
		}
	}
	for i, batch := range [][]string{{saved.ID, loaded.ID}, {idle.ID}, nil} {
		for _, id := range batch {
			passed[id] = true
		}
		sent, received, err := p.worker.Finished(ctx, slices.Clone(batch))
		require.NoError(t, err, "Finished call %d", i+1)
		call := fmt.Sprintf("Finished call %d", i+1)
		record(call, sent, sentSeen, "sent")
		record(call, received, receivedSeen, "received")
	}
}
