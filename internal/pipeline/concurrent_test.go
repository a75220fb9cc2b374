package pipeline_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// runIn runs name in dir, with a bound, and returns its exit code and
// output, stdout then stderr.
func runIn(t *testing.T, dir string, name string, args ...string) (int, string) {
	t.Helper()
	res := kvgentest.Run(t, dir, nil, 3*time.Minute, name, args...)
	return res.Code, res.Stdout + res.Stderr
}

// TestConcurrentGenerates runs two kvgen generates at once in one module,
// each linking a different local connector module into go.mod: both must
// land, or one must fail saying so. Before go.mod was locked and compared
// before writing, both exited 0 and go.mod kept only one of the two.
func TestConcurrentGenerates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvgen and runs the go command")
	}
	kvgen := kvgentest.KVGen(t)
	connector := func(pkg string) string {
		return "package " + pkg + `

import (
	"context"

	"github.com/kvgen/kvgen/registry/kv"
)

func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return nil, nil
}
`
	}
	manifest := func(name string) string {
		return "version: 1\noutput: " + name + "/connectors_gen.go\nconnectors:\n  - name: " + name +
			"\n    import: example.com/" + name + "kv\n    constructor: New\n    replace: ../" + name + "kv\n"
	}
	host := kvgentest.Module(t, "example.com/host", map[string]string{
		"a.yaml":    manifest("a"),
		"b.yaml":    manifest("b"),
		"a/main.go": "package main\n\nfunc main() { _ = Registry }\n",
		"b/main.go": "package main\n\nfunc main() { _ = Registry }\n",
	})
	for _, name := range []string{"a", "b"} {
		dir := filepath.Join(filepath.Dir(host), name+"kv")
		kvgentest.WriteModule(t, dir, "example.com/"+name+"kv", map[string]string{"kv.go": connector(name + "kv")})
	}
	gomod, err := os.ReadFile(filepath.Join(host, "go.mod"))
	require.NoError(t, err)
	gosum, err := os.ReadFile(filepath.Join(host, "go.sum"))
	require.NoError(t, err)

	for round := range 5 {
		require.NoError(t, os.WriteFile(filepath.Join(host, "go.mod"), gomod, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(host, "go.sum"), gosum, 0o644))
		var wg sync.WaitGroup
		codes, outs := make([]int, 2), make([]string, 2)
		for i, m := range []string{"a.yaml", "b.yaml"} {
			wg.Go(func() { codes[i], outs[i] = runIn(t, host, kvgen, "-manifest", m) })
		}
		wg.Wait()
		finalMod, err := os.ReadFile(filepath.Join(host, "go.mod"))
		require.NoError(t, err)
		final := string(finalMod)
		for i, name := range []string{"a", "b"} {
			if codes[i] != 0 {
				// A run that lost the race may fail, but must say so.
				assert.Contains(t, outs[i], "go.mod or go.sum changed", "round %d, %s", round, name)
				continue
			}
			assert.Contains(t, outs[i], "kvgen: go.mod: added example.com/"+name+"kv", "round %d", round)
			assert.Contains(t, final, "example.com/"+name+"kv => ../"+name+"kv", "round %d: %s exited 0, and go.mod lacks its edit:\n%s", round, name, final)
		}
		if codes[0] == 0 && codes[1] == 0 {
			code, out := runIn(t, host, "go", "build", "./...")
			assert.Equal(t, 0, code, "round %d: go build: %s", round, out)
		}
	}
}
