package inspect

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeAll finds every description in a binary's bytes, however they are
// surrounded, and passes over what only starts like one.
func TestDecodeAllFindsEveryDescription(t *testing.T) {
	a := Description{Manifest: "a.yaml", ManifestSHA256: SumManifest([]byte("a")), Connectors: []Connector{{Name: "x", Import: "example.com/x", Constructor: "New", Roles: []string{"worker"}}}}
	b := Description{Manifest: "b.yaml", ManifestSHA256: SumManifest([]byte("b")), Connectors: []Connector{}}
	ea, err := Encode(a)
	require.NoError(t, err)
	eb, err := Encode(b)
	require.NoError(t, err)
	var data bytes.Buffer
	data.WriteString("\x7fELF...")
	data.WriteString(magic + "zzzzzzzz{}")            // not a length
	data.WriteString(magic + "000000ff{\"manifest\"") // a length, then no JSON
	data.WriteString(ea)
	data.WriteString("padding")
	data.WriteString(eb)
	data.WriteString(magic + "0000") // cut short at the end
	got := decodeAll(data.Bytes())
	require.Len(t, got, 2)
	assert.Equal(t, a, got[0])
	assert.Equal(t, "b.yaml", got[1].Manifest)
	assert.Empty(t, decodeAll([]byte("no description here")))
}
