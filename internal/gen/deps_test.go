package gen

import (
	"os/exec"
	"strings"
	"testing"
)

// The generator takes the manifest and the packages as listed, and
// returns the entries and the file: it imports no package that links
// modules or writes files, which the stage before it (package link) and
// the pipeline that runs both do.
func TestGeneratorDoesNotLink(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), deps)
	}
	for _, forbidden := range []string{
		"github.com/kvgen/kvgen/internal/link",       // links modules; writes go.mod and go.sum
		"github.com/kvgen/kvgen/internal/pipeline",   // runs the generator
		"github.com/kvgen/kvgen/internal/atomicfile", // writes files
		"github.com/rogpeppe/go-internal/lockedfile", // locks go.mod to write it
	} {
		for _, d := range deps {
			if d == forbidden {
				t.Errorf("the generator depends on %s; find the importer with: go list -f '{{.ImportPath}}: {{.Imports}}' -deps ./internal/gen | grep %s", d, d)
			}
		}
	}
}
