package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

const pods = `[
	{"name": "pod-a", "queue_depth": 3, "kv_cache_usage": 0.9},
	{"name": "pod-b", "queue_depth": 10, "kv_cache_usage": 0.1},
	{"name": "pod-c", "queue_depth": 200, "kv_cache_usage": 0.0}
]`

const allPlugins = `{"plugins": [
	{"type": "low-queue-filter", "name": "busy", "parameters": {"threshold": 100}},
	{"type": "queue-scorer", "name": "queue"},
	{"type": "kv-cache-utilization-scorer", "name": "kv", "weight": 2}
]}`

const queueOnly = `{"plugins": [{"type": "queue-scorer", "name": "queue"}]}`

// write writes files into dir and returns their paths, by name.
func write(t *testing.T, dir string, files map[string]string) map[string]string {
	t.Helper()
	paths := map[string]string{}
	for name, content := range files {
		paths[name] = filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(paths[name], []byte(content), 0o644))
	}
	return paths
}

// TestMain removes the kvgen command the tests share when they are done.
func TestMain(m *testing.M) { os.Exit(kvgentest.Main(m).Run()) }

// mainModule is this module with the version the go command stamps on a
// main module: "(devel)", or a pseudo-version from the VCS checkout it was
// built in, unless -buildvcs=false.
const mainModule = `github\.com/kvgen/kvgen/examples/scheduler (\(devel\)|v0\.0\.0-\d{14}-[0-9a-f]{12}(\+dirty)?)`

func run(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// TestScheduler builds the scheduler with go build, as a user does after
// go generate, and schedules with every plugin the manifest links.
func TestScheduler(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, map[string]string{"pods.json": pods, "all.json": allPlugins})
	bin := kvgentest.Program(t, ".")

	got, err := run(t, bin, "-config", f["all.json"], "-pods", f["pods.json"])
	require.NoError(t, err, got)
	// pod-c's queue is over the filter's threshold; pod-b's free KV cache,
	// weighted twice, outweighs pod-a's shorter queue.
	assert.Equal(t, "pod-a\t1.20\npod-b\t1.80\npicked pod-b\n", got)

	got, err = run(t, bin, "-list-plugins")
	require.NoError(t, err, got)
	assert.Regexp(t, "^queue-scorer\tscorer\tgithub.com/kvgen/kvgen/examples/scheduler/plugins/queue.New\t"+mainModule+"\n"+
		"kv-cache-utilization-scorer\tscorer\tgithub.com/kvgen/kvgen/examples/scheduler/plugins/kvcache.NewScorer\t"+mainModule+"\n"+
		"low-queue-filter\tfilter\tgithub.com/kvgen/kvgen/examples/scheduler/plugins/lowqueue.New\t"+mainModule+"\n$", got)

	write(t, dir, map[string]string{"bad.json": `{"plugins": [{"type": "low-queue-filter", "name": "busy", "parameters": {"treshold": 1}}]}`})
	got, err = run(t, bin, "-config", filepath.Join(dir, "bad.json"), "-pods", f["pods.json"])
	require.Error(t, err)
	assert.Contains(t, got, `plugin "busy": parameters: json: unknown field "treshold"`)
}

// TestSchedulerDeployment builds the minimal deployment with kvgen build:
// its binary links the queue scorer alone, and a configuration naming
// another plugin fails at start-up, saying what the binary links.
func TestSchedulerDeployment(t *testing.T) {
	dir := t.TempDir()
	kvgen := kvgentest.KVGen(t)
	bin := filepath.Join(dir, "scheduler-minimal")
	out, err := exec.Command(kvgen, "build", "-manifest", "deploy/minimal.yaml", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	got, err := run(t, bin, "-list-plugins")
	require.NoError(t, err, got)
	assert.Regexp(t, "^queue-scorer\tscorer\tgithub.com/kvgen/kvgen/examples/scheduler/plugins/queue.New\t"+mainModule+"\n$", got)

	f := write(t, dir, map[string]string{"pods.json": pods, "queue.json": queueOnly, "all.json": allPlugins})
	got, err = run(t, bin, "-config", f["queue.json"], "-pods", f["pods.json"])
	require.NoError(t, err, got)
	assert.Equal(t, "pod-a\t1.00\npod-b\t0.96\npod-c\t0.00\npicked pod-a\n", got)

	got, err = run(t, bin, "-config", f["all.json"], "-pods", f["pods.json"])
	require.Error(t, err)
	assert.Contains(t, got, `plugin "busy": unknown plugin "low-queue-filter"`)
	assert.Contains(t, got, "linked: queue-scorer;")

}
