package gen

import "github.com/rogpeppe/go-internal/diff"

func unifiedDiff(path string, old, new []byte) []byte {
	return diff.Diff(path+" (committed)", old, path+" (generated)", new)
}
