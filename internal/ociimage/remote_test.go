package ociimage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Docker's config names credential helpers, programs kvgen runs: a name
// with a path separator, which would run a file of the working directory
// rather than one on PATH, is refused before anything runs, as is a config
// too large to be one.
func TestDockerConfigHelpersAreProgramsOnPath(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	config := filepath.Join(dir, "config.json")
	ref := must(ParseRef("registry.example/team/app:v1"))
	for _, c := range []struct{ config, err string }{
		{`{"credsStore": "desktop"}`, ""},
		{`{"credsStore": "../../tmp/evil"}`, `names the credential helper "../../tmp/evil"`},
		{`{"credHelpers": {"registry.example": "sub/helper"}}`, `names the credential helper "sub/helper"`},
		{`{"credHelpers": {"registry.example": "c:\\helper"}}`, `names the credential helper`},
		{`{"credsStore": "../../tmp/evil", "credsstore": "desktop"}`, `names the credential helper "../../tmp/evil"`},
	} {
		require.NoError(t, os.WriteFile(config, []byte(c.config), 0o600))
		_, err := Remote{}.repository(ref)
		if c.err == "" {
			assert.NoError(t, err, c.config)
			continue
		}
		assert.ErrorContains(t, err, c.err, c.config)
	}
	big := append([]byte(`{"auths": {}, "padding": "`), make([]byte, maxDockerConfig)...)
	for i := len(`{"auths": {}, "padding": "`); i < len(big); i++ {
		big[i] = 'x'
	}
	require.NoError(t, os.WriteFile(config, append(big, `"}`...), 0o600))
	_, err := Remote{}.repository(ref)
	assert.ErrorContains(t, err, "larger than")
}
