package load

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The go command's lines fold into one error line: a line that ends in a
// colon goes on with the next, as the go command means it, and package
// headers go.
func TestFoldLines(t *testing.T) {
	for in, want := range map[string]string{
		"go: errors parsing go.mod:\ngo.mod:9: unknown directive: x\n":   "go: errors parsing go.mod: go.mod:9: unknown directive: x",
		"missing go.sum entry; to add:\n\tgo mod download example.com/m": "missing go.sum entry; to add: go mod download example.com/m",
		"# example.com/p\np.go:3:1: a\np.go:4:1: b":                      "p.go:3:1: a; p.go:4:1: b",
		"one line": "one line",
		"\n\n":     "",
	} {
		assert.Equal(t, want, FoldLines(in), "%q", in)
	}
}
