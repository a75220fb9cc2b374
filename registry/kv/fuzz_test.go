package kv_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// maxErrorLine bounds each line of an error about operator input: long
// inputs are shortened, never echoed whole.
const maxErrorLine = 1024

func assertShortLines(t *testing.T, err error) {
	t.Helper()
	for _, line := range strings.Split(err.Error(), "\n") {
		require.LessOrEqual(t, len(line), maxErrorLine, "an error line echoes too much: %.200s...", line)
	}
}

// FuzzParseTransferConfig checks that any input either parses into a
// config that holds the contract's promises or fails with short errors.
func FuzzParseTransferConfig(f *testing.F) {
	for _, s := range []string{
		`{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both","kv_connector_extra_config":{"a":1}}`,
		`{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_buffer_size":"1e9","kv_port":"21001","kv_ip":"127.0.0.1","kv_rank":0,"kv_parallel_size":2}`,
		`{"kv_connector":"memory","block_size":32,"layer_names":["a","b"],"kv_load_failure_policy":"fail","engine_id":"e1"}`,
		`{"kv_connector":"x","block_size":0}`,
		`{"kv_connector":"x","block_size":1099511627776}`,
		`{"kv_connector":"x","kv_role":"\u202e"}`,
		`{"kv_connector":"x","layer_names":[""]}`,
		`{"kv_conector":"x"}`,
		`{"kv_connector":"x","kv_connector_module_path":"a.b"}`,
		`{"kv_connector":"x",` + strings.Repeat(`"k":1,`, 3) + `"z":1}`,
		`[]`, `null`, `{`, `{"kv_connector":1}`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := kv.ParseTransferConfig(data)
		if err != nil {
			assert.Zero(t, cfg.Connector)
			assertShortLines(t, err)
			return
		}
		assert.NotEmpty(t, cfg.Connector)
		assert.NotEmpty(t, cfg.EngineID)
		assert.Positive(t, cfg.BlockSize)
		assert.LessOrEqual(t, cfg.BlockSize, kv.MaxBlockSize)
		assert.Contains(t, []kv.KVRole{kv.KVProducer, kv.KVConsumer, kv.KVBoth}, cfg.KVRole)
		assert.Contains(t, []kv.LoadFailurePolicy{kv.PolicyRecompute, kv.PolicyFail}, cfg.LoadFailurePolicy)
		for _, l := range cfg.LayerNames {
			assert.NotEmpty(t, l)
		}
	})
}

// fuzzOptions is a connector's typed options with one field of each kind
// DecodeExtra handles.
type fuzzOptions struct {
	Path     string            `json:"path"`
	Count    int               `json:"count"`
	Ratio    float64           `json:"ratio"`
	Enabled  bool              `json:"enabled"`
	Timeout  kv.Duration       `json:"timeout"`
	Hosts    []string          `json:"hosts"`
	Labels   map[string]string `json:"labels"`
	Optional *int              `json:"optional"`
	fuzzEmbedded
}

type fuzzEmbedded struct {
	Inner string `json:"inner"`
}

// FuzzDecodeExtra checks that any extra settings either decode, every key
// then being one the options accept, or fail with short errors.
func FuzzDecodeExtra(f *testing.F) {
	for _, s := range []string{
		`{"path":"/kv","count":3,"ratio":0.5,"enabled":true,"timeout":"250ms","hosts":["a"],"labels":{"k":"v"},"optional":1,"inner":"x"}`,
		`{"timeout":1.5}`, `{"timeout":"forever"}`, `{"timeout":-1e300}`, `{"timeout":1e300}`,
		`{"count":"3"}`, `{"count":1e100}`, `{"paht":"/kv"}`, `{"hosts":"a"}`, `{"labels":[1]}`,
		`{"optional":null}`, `{}`, `{"` + strings.Repeat("x", 300) + `":1}`,
	} {
		f.Add([]byte(s))
	}
	known := map[string]bool{}
	for _, k := range []string{"path", "count", "ratio", "enabled", "timeout", "hosts", "labels", "optional", "inner"} {
		known[k] = true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var extra map[string]any
		if json.Unmarshal(data, &extra) != nil {
			return
		}
		opts := fuzzOptions{Path: "default", Timeout: kv.Duration(time.Second)}
		err := kv.DecodeExtra(extra, &opts)
		if err != nil {
			assertShortLines(t, err)
			return
		}
		for k := range extra {
			assert.True(t, known[k], "unknown key %q accepted", k)
		}
		if _, ok := extra["path"]; !ok {
			assert.Equal(t, "default", opts.Path, "a missing key keeps its default")
		}
	})
}
