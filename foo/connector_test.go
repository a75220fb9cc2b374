package foo_test

import (
	"testing"

	"github.com/kvgen/kvgen/registry/conformance"

	"bad path!"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, foo.New, conformance.Options{
		Extra: func(t testing.TB) map[string]any {
			return map[string]any{"path": t.TempDir()}
		},
	})
}
