package pipeline

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/manifest"
)

func TestAnnotatePointsAtTheEntry(t *testing.T) {
	t.Parallel()
	m, err := manifest.Parse("edge.yaml", []byte("version: 1\nconnectors:\n  - name: acme\n    import: example.com/acme/conn\n    constructor: New\n"))
	require.NoError(t, err)
	r := &Result{manifest: m, Entries: []*gen.Entry{{ImportPath: "example.com/acme/conn", Module: "example.com/acme"}}}
	got := r.Annotate("example.com/acme@v1.0.0: missing go.sum entry\nexample.com/acmebar: unrelated\nother line\n")
	assert.Equal(t, `edge.yaml:4:13: connector "acme": example.com/acme@v1.0.0: missing go.sum entry
example.com/acmebar: unrelated
other line`, got)
}

func TestProblemsAreData(t *testing.T) {
	t.Parallel()
	_, err := manifest.Parse("edge.yaml", []byte("version: 1\nconnectors:\n  - name: acme\n    import: example.com/acme/conn\n    colour: blue\n"))
	require.Error(t, err)
	ps := Problems(err)
	require.Len(t, ps, 1)
	assert.Equal(t, "edge.yaml", ps[0].Pos.Filename)
	assert.Equal(t, 5, ps[0].Pos.Line)
	assert.Contains(t, ps[0].Msg, `"colour"`)
	assert.NotContains(t, ps[0].Msg, "edge.yaml:5")
}
