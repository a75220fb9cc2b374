package registry_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry"
)

func TestRoleNames(t *testing.T) {
	assert.Equal(t, "scheduler", registry.RoleScheduler.String())
	assert.Equal(t, "worker", registry.RoleWorker.String())
	assert.Equal(t, "Role(0)", registry.Role(0).String())

	for _, r := range registry.Roles() {
		got, err := registry.ParseRole(r.String())
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}
	_, err := registry.ParseRole("Worker")
	assert.EqualError(t, err, `unknown role "Worker"; did you mean "worker"?`)
	_, err = registry.ParseRole("")
	assert.EqualError(t, err, `unknown role ""; want scheduler or worker`)
}

// TestRolesCannotBeChanged: what one caller does to the list of roles
// cannot change what ParseRole or another caller sees.
func TestRolesCannotBeChanged(t *testing.T) {
	roles := registry.Roles()
	roles[0], roles[1] = registry.RoleWorker, registry.RoleWorker
	assert.Equal(t, []registry.Role{registry.RoleScheduler, registry.RoleWorker}, registry.Roles())
	r, err := registry.ParseRole("scheduler")
	require.NoError(t, err)
	assert.Equal(t, registry.RoleScheduler, r)
}

func TestRoleSet(t *testing.T) {
	var all registry.RoleSet
	assert.True(t, all.Has(registry.RoleScheduler), "the zero set serves every role")
	assert.True(t, all.Has(registry.RoleWorker), "the zero set serves every role")
	assert.Equal(t, []registry.Role{registry.RoleScheduler, registry.RoleWorker}, all.List())
	assert.Equal(t, "scheduler,worker", all.String())
	assert.Equal(t, all, registry.NewRoleSet())

	worker := registry.NewRoleSet(registry.RoleWorker)
	assert.True(t, worker.Has(registry.RoleWorker))
	assert.False(t, worker.Has(registry.RoleScheduler))
	assert.Equal(t, []registry.Role{registry.RoleWorker}, worker.List())
	assert.Equal(t, "worker", worker.String())

	both := registry.NewRoleSet(registry.RoleWorker, registry.RoleScheduler, registry.RoleWorker)
	assert.Equal(t, "scheduler,worker", both.String(), "documented order, each role once")
	assert.Equal(t, []registry.Role{registry.RoleScheduler, registry.RoleWorker}, both.List())
}
