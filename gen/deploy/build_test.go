package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
	"github.com/kvgen/kvgen/internal/redistest"
)

// These tests drive the real CLI: they build kvgen, run `kvgen build` at
// the example server's module with its deployment manifests, and
// run the binaries it writes as separate processes.

// listed is one connector as `kvserver -list-connectors -json` prints it.
type listed struct {
	Name    string   `json:"name"`
	Aliases []string `json:"aliases"`
	Roles   []string `json:"roles"`
	Import  string   `json:"import"`
	Module  string   `json:"module"`
	Version string   `json:"version"`
}

// prefillReport and decodeReport are what kvserver prints with -json.
type prefillReport struct {
	Connector string `json:"connector"`
	Engine    string `json:"engine_id"`
	Prompt    int    `json:"prompt_tokens"`
	Saved     int    `json:"saved_tokens"`
	Layers    int    `json:"layers"`
}

type decodeReport struct {
	Connector  string `json:"connector"`
	Engine     string `json:"engine_id"`
	Prompt     int    `json:"prompt_tokens"`
	Matched    int    `json:"matched_tokens"`
	Loaded     int    `json:"loaded_tokens"`
	Recomputed int    `json:"recomputed_tokens"`
	Verified   bool   `json:"verified"`
}

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

var bothRoles = []string{"scheduler", "worker"}

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

	assert.Equal(t, []listed{{
		Name:    "memory",
		Roles:   bothRoles,
		Import:  "github.com/kvgen/kvgen/examples/connectors/memory",
		Module:  mainModule,
		Version: kvgenVersion,
	}}, listConnectors(t, bin))

	t.Run("in-process handoff", func(t *testing.T) {
		// The memory connector keeps KV in the process, so prefill and
		// decode meet only in the demo mode, which runs both.
		res := runServer(t, bin, "-json", "-kv-transfer-config", transferConfig("memory", "kv_both", "edge-0", nil), "demo")
		require.Equal(t, 0, res.Code, "stderr:\n%s", res.Stderr)
		var both struct {
			Prefill prefillReport `json:"prefill"`
			Decode  decodeReport  `json:"decode"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &both), res.Stdout)
		assert.Equal(t, blockTokens, both.Prefill.Saved)
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
	assert.Equal(t, []listed{
		{
			Name:    "filesystem",
			Aliases: []string{"ExampleConnector", "SharedStorageConnector"},
			Roles:   bothRoles,
			Import:  "github.com/kvgen/kvgen/examples/connectors/filesystem",
			Module:  mainModule,
			Version: kvgenVersion,
		},
		{
			Name:    "MultiConnector",
			Roles:   bothRoles,
			Import:  "github.com/kvgen/kvgen/registry/kv",
			Module:  mainModule,
			Version: kvgenVersion,
		},
		{
			Name:    "redis",
			Roles:   bothRoles,
			Import:  redisModule,
			Module:  redisModule,
			Version: "v0.1.0 => ../external/redis",
		},
	}, listConnectors(t, bin))

	t.Run("filesystem handoff", func(t *testing.T) {
		extra := map[string]any{"shared_storage_path": t.TempDir()}
		testHandoff(t, bin, "filesystem", extra)
	})

	t.Run("redis", func(t *testing.T) {
		redis := redistest.Start(t)

		t.Run("handoff", func(t *testing.T) {
			extra := map[string]any{"addrs": []string{redis.Addr()}, "key_prefix": "e2e:redis:"}
			testHandoff(t, bin, "redis", extra)
		})

		t.Run("MultiConnector handoff", func(t *testing.T) {
			testMultiHandoff(t, bin, redis.Addr())
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
	assert.Equal(t, blockTokens, p.Saved)

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
	assert.Equal(t, "MultiConnector", d.Connector)
	assertLoadedAll(t, d)
}

// testHandoff saves a prompt's KV in one process and loads it in another
// with a different engine id, as disaggregated prefill and decode engines
// do.
func testHandoff(t *testing.T, bin, connector string, extra map[string]any) {
	p := prefill(t, bin, transferConfig(connector, "kv_producer", "prefill-0", extra))
	assert.Equal(t, prefillReport{Connector: connector, Engine: "prefill-0", Prompt: promptTokens, Saved: blockTokens, Layers: 4}, p)

	consumer := transferConfig(connector, "kv_consumer", "decode-0", extra)
	d := decode(t, bin, consumer)
	assert.Equal(t, connector, d.Connector)
	assert.Equal(t, "decode-0", d.Engine)
	assertLoadedAll(t, d)

	assertLoadedNone(t, decode(t, bin, consumer, "-prompt", otherPrompt))
}

func assertLoadedAll(t *testing.T, d decodeReport) {
	t.Helper()
	assert.Equal(t, promptTokens, d.Prompt, "prompt tokens")
	assert.Equal(t, blockTokens, d.Loaded, "loaded tokens")
	assert.Equal(t, promptTokens-blockTokens, d.Recomputed, "recomputed tokens")
	assert.True(t, d.Verified, "loaded KV verified")
}

func assertLoadedNone(t *testing.T, d decodeReport) {
	t.Helper()
	assert.Equal(t, 0, d.Matched, "matched tokens")
	assert.Equal(t, 0, d.Loaded, "loaded tokens")
	assert.Equal(t, promptTokens, d.Recomputed, "recomputed tokens")
}

func prefill(t *testing.T, bin, config string) prefillReport {
	t.Helper()
	var r prefillReport
	runReport(t, bin, &r, "-json", "-kv-transfer-config", config, "-tokens", "100", "prefill")
	return r
}

func decode(t *testing.T, bin, config string, flags ...string) decodeReport {
	t.Helper()
	var r decodeReport
	args := append([]string{"-json", "-kv-transfer-config", config, "-tokens", "100"}, flags...)
	runReport(t, bin, &r, append(args, "decode")...)
	return r
}

func runReport(t *testing.T, bin string, report any, args ...string) {
	t.Helper()
	res := runServer(t, bin, args...)
	require.Equal(t, 0, res.Code, "kvserver %q\nstderr:\n%s", args, res.Stderr)
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), report), "stdout:\n%s", res.Stdout)
}

func listConnectors(t testing.TB, bin string) []listed {
	t.Helper()
	res := runServer(t, bin, "-list-connectors", "-json")
	require.Equal(t, 0, res.Code, "stderr:\n%s", res.Stderr)
	var items []listed
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &items), res.Stdout)
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
