package deploy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/deploy"
)

// Every target go tool dist list lists parses, 386 ports included: a
// GOARCH may start with a digit, and -target linux/386 (or windows/386,
// freebsd/386, ...) was refused as "not a target: want GOOS/GOARCH".
func TestParseTargetAcceptsArchitecturesStartingWithADigit(t *testing.T) {
	for _, s := range []string{"linux/386", "windows/386", "freebsd/386", "plan9/386"} {
		got, err := deploy.ParseTarget(s)
		require.NoError(t, err, s)
		assert.Equal(t, s, got.String())
	}
}
