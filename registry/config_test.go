package registry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry"
)

func TestParseTransferConfigAsVLLMUsersWriteIt(t *testing.T) {
	// The shape of LMCache's and P2P NCCL's documented --kv-transfer-config.
	data := `{
		"kv_connector": "LMCacheConnectorV1",
		"kv_connector_module_path": "lmcache.integration.vllm.lmcache_connector_v1",
		"kv_role": "kv_producer",
		"kv_rank": 0,
		"kv_parallel_size": 2,
		"kv_buffer_device": "cuda",
		"kv_buffer_size": 1e9,
		"kv_ip": "127.0.0.1",
		"kv_port": 14579,
		"enable_permute_local_kv": false,
		"engine_id": "prefill-0",
		"kv_load_failure_policy": "fail",
		"kv_connector_extra_config": {"discard_partial_chunks": false, "lmcache_rpc_port": "producer1"}
	}`
	cfg, err := registry.ParseTransferConfig([]byte(data))
	require.NoError(t, err)
	assert.Equal(t, "LMCacheConnectorV1", cfg.Connector)
	assert.Equal(t, "prefill-0", cfg.EngineID)
	assert.Equal(t, registry.KVProducer, cfg.KVRole)
	assert.Equal(t, registry.PolicyFail, cfg.LoadFailurePolicy)
	assert.Equal(t, registry.DefaultBlockSize, cfg.BlockSize)
	assert.Equal(t, map[string]any{"discard_partial_chunks": false, "lmcache_rpc_port": "producer1"}, cfg.Extra)
	assert.Nil(t, cfg.Registry())
}

func TestParseTransferConfigDefaults(t *testing.T) {
	cfg, err := registry.ParseTransferConfig([]byte(`{"kv_connector": "NixlConnector", "kv_connector_module_path": null}`))
	require.NoError(t, err)
	assert.Equal(t, "NixlConnector", cfg.Connector)
	assert.Equal(t, registry.KVBoth, cfg.KVRole)
	assert.Equal(t, registry.PolicyRecompute, cfg.LoadFailurePolicy)
	assert.Equal(t, 16, cfg.BlockSize)
	assert.Empty(t, cfg.LayerNames)
	assert.Empty(t, cfg.Extra)
	assert.Regexp(t, `^[0-9a-f]{32}$`, cfg.EngineID)

	other, err := registry.ParseTransferConfig([]byte(`{"kv_connector": "NixlConnector", "engine_id": ""}`))
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9a-f]{32}$`, other.EngineID)
	assert.NotEqual(t, cfg.EngineID, other.EngineID, "each engine gets its own id")

	set, err := registry.ParseTransferConfig([]byte(`{"kv_connector": "memory", "block_size": 32, "kv_role": "kv_consumer",
		"layer_names": ["model.layers.0.self_attn", "model.layers.1.self_attn"]}`))
	require.NoError(t, err)
	assert.Equal(t, 32, set.BlockSize)
	assert.Equal(t, registry.KVConsumer, set.KVRole)
	assert.Equal(t, []string{"model.layers.0.self_attn", "model.layers.1.self_attn"}, set.LayerNames)
}

func TestParseTransferConfigErrors(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{
			name: "syntax error on the first line",
			data: `{"kv_connector": "memory" "kv_role": "kv_both"}`,
			want: `kv transfer config: line 1, column 27: invalid character '"' after object key:value pair`,
		},
		{
			name: "syntax error further down",
			data: "{\n  \"kv_connector\": \"memory\",\n  \"block_size\": 16,,\n}",
			want: `kv transfer config: line 3, column 20: invalid character ',' looking for beginning of object key string`,
		},
		{
			name: "truncated",
			data: "{\n  \"kv_connector\": \"memory\"",
			want: `kv transfer config: line 2, column 27: unexpected end of JSON input`,
		},
		{
			name: "not an object",
			data: `["memory"]`,
			want: `kv transfer config: got JSON array, want an object`,
		},
		{
			name: "null",
			data: `null`,
			want: `kv transfer config: want a JSON object`,
		},
		{
			name: "string for an integer",
			data: `{"kv_connector": "memory", "block_size": "16"}`,
			want: `kv transfer config: block_size: got JSON string, want an integer`,
		},
		{
			name: "fraction for an integer",
			data: `{"kv_connector": "memory", "block_size": 1.5}`,
			want: `kv transfer config: block_size: got JSON number 1.5, want an integer`,
		},
		{
			name: "number for a string",
			data: `{"kv_connector": 7}`,
			want: `kv transfer config: kv_connector: got JSON number, want a string`,
		},
		{
			name: "string for a list",
			data: `{"kv_connector": "memory", "layer_names": "layer.0"}`,
			want: `kv transfer config: layer_names: got JSON string, want an array`,
		},
		{
			name: "list for the extra config",
			data: `{"kv_connector": "memory", "kv_connector_extra_config": []}`,
			want: `kv transfer config: kv_connector_extra_config: got JSON array, want an object`,
		},
		{
			name: "unknown keys",
			data: `{"kv_conector": "memory", "kv_rol": "kv_both", "zzzzzzzzzz": 1}`,
			want: "kv transfer config: unknown key \"kv_conector\" (did you mean \"kv_connector\"?)\n" +
				"kv transfer config: unknown key \"kv_rol\" (did you mean \"kv_role\"?)\n" +
				"kv transfer config: unknown key \"zzzzzzzzzz\"",
		},
		{
			name: "bad kv_role",
			data: `{"kv_connector": "memory", "kv_role": "producer"}`,
			want: `kv transfer config: kv_role "producer": want "kv_producer", "kv_consumer" or "kv_both"`,
		},
		{
			name: "bad policy",
			data: `{"kv_connector": "memory", "kv_load_failure_policy": "retry"}`,
			want: `kv transfer config: kv_load_failure_policy "retry": want "recompute" or "fail"`,
		},
		{
			name: "bad block_size",
			data: `{"kv_connector": "memory", "block_size": 0}`,
			want: `kv transfer config: block_size 0: want a positive number of tokens`,
		},
		{
			name: "missing kv_connector",
			data: `{"kv_role": "kv_both"}`,
			want: `kv transfer config: kv_connector is required`,
		},
		{
			name: "empty layer name",
			data: `{"kv_connector": "memory", "layer_names": ["layer.0", ""]}`,
			want: `kv transfer config: layer_names[1] is empty`,
		},
		{
			name: "every value problem at once",
			data: `{"kv_role": "both", "block_size": -16, "kv_load_failure_policy": "abort"}`,
			want: "kv transfer config: kv_connector is required\n" +
				"kv transfer config: kv_role \"both\": want \"kv_producer\", \"kv_consumer\" or \"kv_both\"\n" +
				"kv transfer config: block_size -16: want a positive number of tokens\n" +
				"kv transfer config: kv_load_failure_policy \"abort\": want \"recompute\" or \"fail\"",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := registry.ParseTransferConfig([]byte(tt.data))
			assert.EqualError(t, err, tt.want)
		})
	}
}

// cacheOptions is a connector's typed kv_connector_extra_config.
type cacheOptions struct {
	Capacity int               `json:"capacity"`
	Dir      string            `json:"dir"`
	TTL      registry.Duration `json:"ttl"`
	Compress bool              `json:"compress"`
	Shards   []string          `json:"shards"`
	Tuning
}

// Tuning is embedded, so its keys sit beside cacheOptions' own.
type Tuning struct {
	Retries int `json:"retries"`
}

func TestDecodeExtra(t *testing.T) {
	opts := cacheOptions{Capacity: 1024, Dir: "/var/cache/kv", TTL: registry.Duration(time.Minute)}
	err := registry.DecodeExtra(map[string]any{"capacity": 4096, "ttl": "250ms", "retries": 3, "shards": []any{"a", "b"}}, &opts)
	require.NoError(t, err)
	assert.Equal(t, cacheOptions{
		Capacity: 4096,
		Dir:      "/var/cache/kv", // not in extra: the default stays
		TTL:      registry.Duration(250 * time.Millisecond),
		Shards:   []string{"a", "b"},
		Tuning:   Tuning{Retries: 3},
	}, opts)

	// Python configs write durations as seconds.
	require.NoError(t, registry.DecodeExtra(map[string]any{"ttl": 1.5}, &opts))
	assert.Equal(t, 1500*time.Millisecond, time.Duration(opts.TTL))

	// Nothing to decode keeps every default.
	kept := cacheOptions{Capacity: 7}
	require.NoError(t, registry.DecodeExtra(nil, &kept))
	assert.Equal(t, cacheOptions{Capacity: 7}, kept)
}

func TestDecodeExtraErrors(t *testing.T) {
	tests := []struct {
		name  string
		extra map[string]any
		want  string
	}{
		{
			name:  "unknown key",
			extra: map[string]any{"capacty": 1},
			want:  `kv_connector_extra_config: unknown key "capacty" (did you mean "capacity"?)`,
		},
		{
			name:  "unknown key of an embedded struct",
			extra: map[string]any{"retrys": 1},
			want:  `kv_connector_extra_config: unknown key "retrys" (did you mean "retries"?)`,
		},
		{
			name:  "string for an integer",
			extra: map[string]any{"capacity": "4GiB"},
			want:  `kv_connector_extra_config: capacity: got JSON string, want an integer`,
		},
		{
			name:  "number for a bool",
			extra: map[string]any{"compress": 1},
			want:  `kv_connector_extra_config: compress: got JSON number, want true or false`,
		},
		{
			name:  "bad duration",
			extra: map[string]any{"ttl": "10 minutes"},
			want:  `kv_connector_extra_config: ttl: duration "10 minutes": want a Go duration such as "500ms" or "2s", or a number of seconds`,
		},
		{
			name:  "bool for a duration",
			extra: map[string]any{"ttl": true},
			want:  `kv_connector_extra_config: ttl: duration true: want a string such as "2s" or a number of seconds`,
		},
		{
			name:  "every bad value at once",
			extra: map[string]any{"ttl": "soon", "capacity": "big", "dir": "/tmp/kv"},
			want: "kv_connector_extra_config: capacity: got JSON string, want an integer\n" +
				`kv_connector_extra_config: ttl: duration "soon": want a Go duration such as "500ms" or "2s", or a number of seconds`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts cacheOptions
			assert.EqualError(t, registry.DecodeExtra(tt.extra, &opts), tt.want)
		})
	}

	var notStruct int
	assert.EqualError(t, registry.DecodeExtra(map[string]any{"a": 1}, &notStruct),
		"registry.DecodeExtra: dst must be a non-nil pointer to a struct, not *int")
	assert.EqualError(t, registry.DecodeExtra(map[string]any{"a": 1}, cacheOptions{}),
		"registry.DecodeExtra: dst must be a non-nil pointer to a struct, not registry_test.cacheOptions")
}

func TestDuration(t *testing.T) {
	var d registry.Duration
	require.NoError(t, d.UnmarshalJSON([]byte(`"250ms"`)))
	assert.Equal(t, registry.Duration(250*time.Millisecond), d)
	require.NoError(t, d.UnmarshalJSON([]byte(`1.5`)))
	assert.Equal(t, registry.Duration(1500*time.Millisecond), d)
	assert.Equal(t, "1.5s", d.String())

	out, err := d.MarshalJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `"1.5s"`, string(out))
	var back registry.Duration
	require.NoError(t, back.UnmarshalJSON(out))
	assert.Equal(t, d, back)

	assert.EqualError(t, d.UnmarshalJSON([]byte(`[1]`)), `duration [1]: want a string such as "2s" or a number of seconds`)
	assert.Equal(t, registry.Duration(1500*time.Millisecond), d, "a failed decode leaves the value")
}
