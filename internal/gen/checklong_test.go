package gen

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/manifest"
)

// A constructor name may be up to 256 bytes (the manifest refuses more);
// an error about a missing one names it by its first bytes and its length.
func TestLongConstructorNameIsShortened(t *testing.T) {
	long := "New" + strings.Repeat("X", 253)
	m, err := manifest.Parse("connectors.yaml", []byte("version: 1\nconnectors:\n  - name: a\n    import: example.com/a\n    constructor: "+long+"\n"))
	require.NoError(t, err)
	_, c := registryPackage(t)
	lp := madeUpPackage("example.com/a", c)
	var errs diag.List
	entries, err := checkEntries(&errs, m, &load.Listing{}, map[string]*loadedPackage{"example.com/a": lp}, "", &kvContract, true, func(s string) string { return s }, nil)
	require.NoError(t, err)
	assert.Empty(t, entries)
	require.Error(t, errs.Err())
	assert.Equal(t, `connectors.yaml:5:18: connector "a": package "example.com/a" has no function "NewXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"... (256 bytes)`, errs.Err().Error())
}
