package kv_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

func TestRoleNames(t *testing.T) {
	assert.Equal(t, "scheduler", kv.RoleScheduler.String())
	assert.Equal(t, "worker", kv.RoleWorker.String())
	assert.Equal(t, "Role(0)", kv.Role(0).String())

	for _, r := range kv.Roles() {
		got, err := kv.ParseRole(r.String())
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}
	_, err := kv.ParseRole("Worker")
	assert.EqualError(t, err, `unknown role "Worker"; did you mean "worker"?`)
	_, err = kv.ParseRole("")
	assert.EqualError(t, err, `unknown role ""; want scheduler or worker`)
}

// TestRolesCannotBeChanged: what one caller does to the list of roles
// cannot change what ParseRole or another caller sees.
func TestRolesCannotBeChanged(t *testing.T) {
	roles := kv.Roles()
	roles[0], roles[1] = kv.RoleWorker, kv.RoleWorker
	assert.Equal(t, []kv.Role{kv.RoleScheduler, kv.RoleWorker}, kv.Roles())
	r, err := kv.ParseRole("scheduler")
	require.NoError(t, err)
	assert.Equal(t, kv.RoleScheduler, r)
}
