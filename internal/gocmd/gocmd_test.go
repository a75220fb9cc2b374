package gocmd

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A listing collects its heap less often unless the caller chose how
// often, even as the default (GOGC=), and the caller's env is not written
// to.
func TestForListing(t *testing.T) {
	env := make([]string, 2, 4)
	env[0], env[1] = "HOME=/h", "GOFLAGS=-mod=mod"
	got := ForListing(env)
	assert.Equal(t, []string{"HOME=/h", "GOFLAGS=-mod=mod", "GOGC=200"}, got)
	assert.Equal(t, []string{"HOME=/h", "GOFLAGS=-mod=mod"}, env[:2])
	assert.Equal(t, "", env[:3][2], "the caller's spare capacity is left alone")

	for _, own := range []string{"GOGC=50", "GOGC=off", "GOGC="} {
		env := []string{own, "HOME=/h"}
		assert.Equal(t, env, ForListing(env), own)
	}

	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	got = ForListing(nil)
	assert.Equal(t, "GOGC=200", got[len(got)-1])
	assert.True(t, slices.Contains(got, "PATH="+os.Getenv("PATH")), "nil is the process's environment")
}
