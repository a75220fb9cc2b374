package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// These tests drive the real CLI: they build kvgen, run `kvgen build` at
// the example server's module with its deployment manifests, and
// run the binaries it writes as separate processes.

// object is a JSON object kvserver prints with -json: a report, or a
// connector it lists. Its types are its own module's, which this one
// cannot import; the tests read only the keys they assert.
type object map[string]any

const (
	mainModule  = "github.com/kvgen/kvgen"
	redisModule = "github.com/kvgen/kvgen/examples/external/redis"
	// promptTokens is kvserver's default prompt length; with vLLM's block
	// of 16 tokens, 96 are saved, and decode loads at most 96 since the
	// last prompt token is always computed.
	promptTokens = 100
	blockTokens  = 96
	otherPrompt  = "something else"
)

// kvgenVersion is the version the example server's build records for
// kvgen: its go.mod requires kvgen at the zero version and replaces it by
// this checkout.
const kvgenVersion = "v0.0.0-00010101000000-000000000000 => ../.."

var bothRoles = []any{"scheduler", "worker"}

func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvgen and two deployment binaries")
	}
	root := kvgentest.Root(t)
	kvgen := kvgentest.KVGen(t)
	before := snapshotRepo(t, root)

	t.Run("errors", func(t *testing.T) {
		testBuildErrors(t, root, kvgen)
		assertRepoUnchanged(t, before, snapshotRepo(t, root))
	})
	// One build after the other: both compile the standard library and
	// the connectors with -trimpath, and the second finds what they share
	// in the build cache, where side by side on a cold cache both would
	// compile it. What runs the binaries runs in parallel.
	bins := t.TempDir()
	edge, datacenter := filepath.Join(bins, "kvserver-edge"), filepath.Join(bins, "kvserver-dc")
	kvgenBuild(t, root, kvgen, "deploy/edge.yaml", edge)
	kvgenBuild(t, root, kvgen, "deploy/datacenter.yaml", datacenter)
	assertRepoUnchanged(t, before, snapshotRepo(t, root))

	t.Run("deployments", func(t *testing.T) {
		t.Run("edge", func(t *testing.T) {
			t.Parallel()
			testEdge(t, edge)
		})
		t.Run("datacenter", func(t *testing.T) {
			t.Parallel()
			testDatacenter(t, datacenter)
		})
	})
}

func testEdge(t *testing.T, bin string) {

	assert.Equal(t, []object{{
		"name":    "memory",
		"roles":   bothRoles,
		"import":  "github.com/kvgen/kvgen/examples/connectors/memory",
		"module":  mainModule,
		"version": kvgenVersion,
	}}, listConnectors(t, bin))

	t.Run("in-process handoff", func(t *testing.T) {
		// The memory connector keeps KV in the process, so prefill and
		// decode meet only in the demo mode, which runs both.
		res := runServer(t, bin, "-json", "-kv-transfer-config", transferConfig("memory", "kv_both", "edge-0", nil), "demo")
		require.Equal(t, 0, res.Code, "stderr:\n%s", res.Stderr)
		var both struct{ Prefill, Decode object }
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &both), res.Stdout)
		assert.EqualValues(t, blockTokens, both.Prefill["saved_tokens"])
		assertLoadedAll(t, both.Decode)
	})

	t.Run("rejects a connector it does not link", func(t *testing.T) {
		res := runServer(t, bin, "-json", "-kv-transfer-config", transferConfig("redis", "kv_producer", "prefill-0", nil), "prefill")
		assert.NotEqual(t, 0, res.Code)
		assert.Contains(t, res.Stderr, `unknown kv connector "redis"`)
		assert.Contains(t, res.Stderr, "linked: memory")
		assert.Empty(t, res.Stdout)
	})
}

func testDatacenter(t *testing.T, bin string) {
	// The example server's manifest, which datacenter.yaml extends, less
	// memory, then Redis.
	assert.Equal(t, []object{
		{
			"name":    "filesystem",
			"aliases": []any{"ExampleConnector", "SharedStorageConnector"},
			"roles":   bothRoles,
			"import":  "github.com/kvgen/kvgen/examples/connectors/filesystem",
			"module":  mainModule,
			"version": kvgenVersion,
		},
		{
			"name":    "MultiConnector",
			"roles":   bothRoles,
			"import":  "github.com/kvgen/kvgen/registry/kv",
			"module":  mainModule,
			"version": kvgenVersion,
		},
		{
			"name":    "redis",
			"roles":   bothRoles,
			"import":  redisModule,
			"module":  redisModule,
			"version": "v0.1.0 => ../external/redis",
		},
	}, listConnectors(t, bin))

	t.Run("filesystem handoff", func(t *testing.T) {
		extra := map[string]any{"shared_storage_path": t.TempDir()}
		testHandoff(t, bin, "filesystem", extra)
	})

	t.Run("redis", func(t *testing.T) {
		redis := startRedis(t)

		t.Run("handoff", func(t *testing.T) {
			extra := map[string]any{"addrs": []string{redis}, "key_prefix": "e2e:redis:"}
			testHandoff(t, bin, "redis", extra)
		})

		t.Run("MultiConnector handoff", func(t *testing.T) {
			testMultiHandoff(t, bin, redis)
		})
	})
}

// testMultiHandoff saves through a MultiConnector of the filesystem and
// Redis connectors, and loads from Redis once the files are gone.
func testMultiHandoff(t *testing.T, bin, redisAddr string) {
	dir := t.TempDir()
	fsExtra := map[string]any{"shared_storage_path": dir}
	redisExtra := map[string]any{"addrs": []string{redisAddr}, "key_prefix": "e2e:multi:"}
	multiExtra := map[string]any{"connectors": []map[string]any{
		{"kv_connector": "filesystem", "kv_connector_extra_config": fsExtra},
		{"kv_connector": "redis", "kv_connector_extra_config": redisExtra},
	}}

	p := prefill(t, bin, transferConfig("MultiConnector", "kv_producer", "prefill-0", multiExtra))
	assert.EqualValues(t, blockTokens, p["saved_tokens"])

	// It saved to both children: each alone has the whole prefix.
	assertLoadedAll(t, decode(t, bin, transferConfig("filesystem", "kv_consumer", "decode-0", fsExtra)))
	assertLoadedAll(t, decode(t, bin, transferConfig("redis", "kv_consumer", "decode-0", redisExtra)))

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries, "prefill left nothing in the shared directory")
	for _, e := range entries {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	assertLoadedNone(t, decode(t, bin, transferConfig("filesystem", "kv_consumer", "decode-0", fsExtra)))

	// With the first child empty, the MultiConnector loads from Redis.
	d := decode(t, bin, transferConfig("MultiConnector", "kv_consumer", "decode-0", multiExtra))
	assert.Equal(t, "MultiConnector", d["connector"])
	assertLoadedAll(t, d)
}

// testHandoff saves a prompt's KV in one process and loads it in another
// with a different engine id, as disaggregated prefill and decode engines
// do.
func testHandoff(t *testing.T, bin, connector string, extra map[string]any) {
	p := prefill(t, bin, transferConfig(connector, "kv_producer", "prefill-0", extra))
	assert.Equal(t, connector, p["connector"])
	assert.Equal(t, "prefill-0", p["engine_id"])
	assert.EqualValues(t, promptTokens, p["prompt_tokens"])
	assert.EqualValues(t, blockTokens, p["saved_tokens"])
	assert.EqualValues(t, 4, p["layers"])

	consumer := transferConfig(connector, "kv_consumer", "decode-0", extra)
	d := decode(t, bin, consumer)
	assert.Equal(t, connector, d["connector"])
	assert.Equal(t, "decode-0", d["engine_id"])
	assertLoadedAll(t, d)

	assertLoadedNone(t, decode(t, bin, consumer, "-prompt", otherPrompt))
}

func assertLoadedAll(t *testing.T, d object) {
	t.Helper()
	assert.EqualValues(t, promptTokens, d["prompt_tokens"], "prompt tokens")
	assert.EqualValues(t, blockTokens, d["loaded_tokens"], "loaded tokens")
	assert.EqualValues(t, promptTokens-blockTokens, d["recomputed_tokens"], "recomputed tokens")
	assert.Equal(t, true, d["verified"], "loaded KV verified")
}

func assertLoadedNone(t *testing.T, d object) {
	t.Helper()
	assert.EqualValues(t, 0, d["matched_tokens"], "matched tokens")
	assert.EqualValues(t, 0, d["loaded_tokens"], "loaded tokens")
	assert.EqualValues(t, promptTokens, d["recomputed_tokens"], "recomputed tokens")
}

// prefill runs kvserver's prefill step and returns its report.
func prefill(t *testing.T, bin, config string) object {
	t.Helper()
	var r object
	runReport(t, bin, &r, "-json", "-kv-transfer-config", config, "-tokens", "100", "prefill")
	return r
}

// decode runs kvserver's decode step and returns its report.
func decode(t *testing.T, bin, config string, flags ...string) object {
	t.Helper()
	var r object
	args := append([]string{"-json", "-kv-transfer-config", config, "-tokens", "100"}, flags...)
	runReport(t, bin, &r, append(args, "decode")...)
	return r
}

// runReport runs kvserver with args and decodes its JSON output into v.
func runReport(t testing.TB, bin string, v any, args ...string) {
	t.Helper()
	res := runServer(t, bin, args...)
	require.Equal(t, 0, res.Code, "kvserver %q\nstderr:\n%s", args, res.Stderr)
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), v), "stdout:\n%s", res.Stdout)
}

// listConnectors returns the connectors kvserver lists.
func listConnectors(t testing.TB, bin string) []object {
	t.Helper()
	var items []object
	runReport(t, bin, &items, "-list-connectors", "-json")
	return items
}

// transferConfig renders a vLLM-style --kv-transfer-config.
func transferConfig(connector, role, engine string, extra map[string]any) string {
	cfg := map[string]any{"kv_connector": connector, "kv_role": role, "engine_id": engine}
	if extra != nil {
		cfg["kv_connector_extra_config"] = extra
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // maps of strings, slices and maps always encode
	}
	return string(data)
}
