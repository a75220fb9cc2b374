package main

import (
	"os/exec"
	"strings"
	"testing"
)

// kvRuntime is the KV connector contract's package: the tool reads its
// markers as data, and links none of it.
const kvRuntime = "github.com/kvgen/kvgen/registry/kv"

// The kvgen binary treats the KV contract as any other: it does not link
// the KV runtime, whose config parsing kvgen build -for once called. A
// contract's rules are data its markers declare.
func TestToolDoesNotLinkKVRuntime(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	for dep := range strings.Lines(string(out)) {
		if dep = strings.TrimSpace(dep); dep == kvRuntime || strings.HasPrefix(dep, kvRuntime+"/") {
			t.Errorf("cmd/kvgen depends on %s; find the importer with: go list -f '{{.ImportPath}}: {{.Imports}}' -deps ./cmd/kvgen | grep %s", dep, kvRuntime)
		}
	}
}
