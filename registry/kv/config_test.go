package kv_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

func TestParseTransferConfigAsVLLMUsersWriteIt(t *testing.T) {
	// The shape of LMCache's and P2P NCCL's documented --kv-transfer-config.
	data := `{
		"kv_connector": "LMCacheConnectorV1",
		"kv_connector_module_path": null,
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
	cfg, err := kv.ParseTransferConfig([]byte(data))
	require.NoError(t, err)
	assert.Equal(t, "LMCacheConnectorV1", cfg.Connector)
	assert.Equal(t, "prefill-0", cfg.EngineID)
	assert.Equal(t, kv.KVProducer, cfg.KVRole)
	assert.Equal(t, kv.PolicyFail, cfg.LoadFailurePolicy)
	assert.Equal(t, kv.DefaultBlockSize, cfg.BlockSize)
	assert.Equal(t, map[string]any{"discard_partial_chunks": false, "lmcache_rpc_port": "producer1"}, cfg.Extra)
	assert.Nil(t, cfg.Registry())
	require.NotNil(t, cfg.KVRank)
	assert.Equal(t, 0, *cfg.KVRank)
	assert.Equal(t, 2, cfg.KVParallelSize)
	assert.Equal(t, "cuda", cfg.KVBufferDevice)
	assert.Equal(t, 1e9, cfg.KVBufferSize)
	assert.Equal(t, "127.0.0.1", cfg.KVIP)
	assert.Equal(t, 14579, cfg.KVPort)
	assert.False(t, cfg.EnablePermuteLocalKV)
	assert.Empty(t, cfg.Model, "the host sets the model, not the transfer config")
}

func TestParseTransferConfigDefaults(t *testing.T) {
	cfg, err := kv.ParseTransferConfig([]byte(`{"kv_connector": "NixlConnector", "kv_connector_module_path": null}`))
	require.NoError(t, err)
	assert.Equal(t, "NixlConnector", cfg.Connector)
	assert.Equal(t, kv.KVBoth, cfg.KVRole)
	assert.Equal(t, kv.PolicyFail, cfg.LoadFailurePolicy, "current vLLM's default")
	assert.Equal(t, 16, cfg.BlockSize)
	// vLLM's defaults for the fields connectors read as they are.
	assert.Nil(t, cfg.KVRank)
	assert.Equal(t, 1, cfg.KVParallelSize)
	assert.Equal(t, "cuda", cfg.KVBufferDevice)
	assert.Equal(t, 1e9, cfg.KVBufferSize)
	assert.Equal(t, "127.0.0.1", cfg.KVIP)
	assert.Equal(t, 14579, cfg.KVPort)
	assert.False(t, cfg.EnablePermuteLocalKV)
	assert.Empty(t, cfg.LayerNames)
	assert.Empty(t, cfg.Extra)
	assert.Regexp(t, `^[0-9a-f]{32}$`, cfg.EngineID)

	other, err := kv.ParseTransferConfig([]byte(`{"kv_connector": "NixlConnector", "engine_id": ""}`))
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9a-f]{32}$`, other.EngineID)
	assert.NotEqual(t, cfg.EngineID, other.EngineID, "each engine gets its own id")

	set, err := kv.ParseTransferConfig([]byte(`{"kv_connector": "memory", "block_size": 32, "kv_role": "kv_consumer",
		"layer_names": ["model.layers.0.self_attn", "model.layers.1.self_attn"]}`))
	require.NoError(t, err)
	assert.Equal(t, 32, set.BlockSize)
	assert.Equal(t, kv.KVConsumer, set.KVRole)
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
			name: "word for an integer",
			data: `{"kv_connector": "memory", "kv_port": "not-a-port"}`,
			want: `kv transfer config: kv_port "not-a-port": want an integer`,
		},
		{
			name: "fraction for an integer",
			data: `{"kv_connector": "memory", "block_size": 1.5}`,
			want: `kv transfer config: block_size 1.5: want an integer`,
		},
		{
			name: "number for a string",
			data: `{"kv_connector": 7}`,
			want: `kv transfer config: kv_connector 7: want a string`,
		},
		{
			name: "string for a list",
			data: `{"kv_connector": "memory", "layer_names": "layer.0"}`,
			want: `kv transfer config: layer_names "layer.0": want an array of layer names`,
		},
		{
			name: "list for the extra config",
			data: `{"kv_connector": "memory", "kv_connector_extra_config": []}`,
			want: `kv transfer config: kv_connector_extra_config []: want an object`,
		},
		{
			name: "null extra config",
			data: `{"kv_connector": "memory", "kv_connector_extra_config": null}`,
			want: `kv transfer config: kv_connector_extra_config null: want an object`,
		},
		{
			name: "null policy",
			data: `{"kv_connector": "memory", "kv_load_failure_policy": null}`,
			want: `kv transfer config: kv_load_failure_policy null: want "recompute" or "fail"`,
		},
		{
			name: "port out of range",
			data: `{"kv_connector": "memory", "kv_port": 65536}`,
			want: `kv transfer config: kv_port 65536: want a TCP port, 0 to 65535`,
		},
		{
			name: "block size too large to allocate",
			data: `{"kv_connector": "memory", "block_size": 1099511627776}`,
			want: `kv transfer config: block_size 1099511627776: want a number of tokens from 1 to 65536`,
		},
		{
			name: "long bad value is cut short",
			data: `{"kv_connector": "memory", "kv_ip": [` + strings.Repeat(`"aaaaaaaaaa",`, 100) + `"z"]}`,
			want: `kv transfer config: kv_ip ["aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa... (1305 bytes): want a string`,
		},
		{
			name: "module path",
			data: `{"kv_connector": "LMCacheConnectorV1", "kv_connector_module_path": "lmcache.integration.vllm.lmcache_connector_v1"}`,
			want: `kv transfer config: kv_connector_module_path "lmcache.integration.vllm.lmcache_connector_v1": ` +
				`a Go binary cannot load connectors at run time, kvgen links them when it is built; ` +
				`add the connector's Go package to connectors.yaml as - {name: LMCacheConnectorV1, import: IMPORT/PATH}, ` +
				`regenerate and rebuild, and leave kv_connector_module_path out`,
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
			want: `kv transfer config: block_size 0: want a number of tokens from 1 to 65536`,
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
			name: "layer named twice",
			data: `{"kv_connector": "memory", "layer_names": ["layer.0", "layer.1", "layer.0"]}`,
			want: `kv transfer config: layer_names[2] "layer.0" is layer_names[0] again; name each layer once`,
		},
		{
			name: "every value problem at once",
			data: `{"kv_role": "both", "block_size": -16, "kv_load_failure_policy": "abort"}`,
			want: "kv transfer config: kv_connector is required\n" +
				"kv transfer config: kv_role \"both\": want \"kv_producer\", \"kv_consumer\" or \"kv_both\"\n" +
				"kv transfer config: kv_load_failure_policy \"abort\": want \"recompute\" or \"fail\"\n" +
				"kv transfer config: block_size -16: want a number of tokens from 1 to 65536",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kv.ParseTransferConfig([]byte(tt.data))
			assert.EqualError(t, err, tt.want)
		})
	}
}

// cacheOptions is a connector's typed kv_connector_extra_config.
type cacheOptions struct {
	Capacity int         `json:"capacity"`
	Dir      string      `json:"dir"`
	TTL      kv.Duration `json:"ttl"`
	Compress bool        `json:"compress"`
	Shards   []string    `json:"shards"`
	Tuning
}

// Tuning is embedded, so its keys sit beside cacheOptions' own.
type Tuning struct {
	Retries int `json:"retries"`
}

func TestDecodeExtra(t *testing.T) {
	opts := cacheOptions{Capacity: 1024, Dir: "/var/cache/kv", TTL: kv.Duration(time.Minute)}
	err := kv.DecodeExtra(map[string]any{"capacity": 4096, "ttl": "250ms", "retries": 3, "shards": []any{"a", "b"}}, &opts)
	require.NoError(t, err)
	assert.Equal(t, cacheOptions{
		Capacity: 4096,
		Dir:      "/var/cache/kv", // not in extra: the default stays
		TTL:      kv.Duration(250 * time.Millisecond),
		Shards:   []string{"a", "b"},
		Tuning:   Tuning{Retries: 3},
	}, opts)

	// Python configs write durations as seconds.
	require.NoError(t, kv.DecodeExtra(map[string]any{"ttl": 1.5}, &opts))
	assert.Equal(t, 1500*time.Millisecond, time.Duration(opts.TTL))

	// Nothing to decode keeps every default.
	kept := cacheOptions{Capacity: 7}
	require.NoError(t, kv.DecodeExtra(nil, &kept))
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
			extra: map[string]any{"ttl": "soon", "capacity": "big", "dir": "kv"},
			want: "kv_connector_extra_config: capacity: got JSON string, want an integer\n" +
				`kv_connector_extra_config: ttl: duration "soon": want a Go duration such as "500ms" or "2s", or a number of seconds`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts cacheOptions
			assert.EqualError(t, kv.DecodeExtra(tt.extra, &opts), tt.want)
		})
	}

	var notStruct int
	assert.EqualError(t, kv.DecodeExtra(map[string]any{"a": 1}, &notStruct),
		"kv.DecodeExtra: dst must be a non-nil pointer to a struct, not *int")
	assert.EqualError(t, kv.DecodeExtra(map[string]any{"a": 1}, cacheOptions{}),
		"kv.DecodeExtra: dst must be a non-nil pointer to a struct, not kv_test.cacheOptions")
}

func TestDuration(t *testing.T) {
	var d kv.Duration
	require.NoError(t, d.UnmarshalJSON([]byte(`"250ms"`)))
	assert.Equal(t, kv.Duration(250*time.Millisecond), d)
	require.NoError(t, d.UnmarshalJSON([]byte(`1.5`)))
	assert.Equal(t, kv.Duration(1500*time.Millisecond), d)
	assert.Equal(t, "1.5s", d.String())

	out, err := d.MarshalJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `"1.5s"`, string(out))
	var back kv.Duration
	require.NoError(t, back.UnmarshalJSON(out))
	assert.Equal(t, d, back)

	assert.EqualError(t, d.UnmarshalJSON([]byte(`[1]`)), `duration [1]: want a string such as "2s" or a number of seconds`)
	assert.Equal(t, kv.Duration(1500*time.Millisecond), d, "a failed decode leaves the value")
}

func TestDecodeExtraNumbersExactly(t *testing.T) {
	cfg, err := kv.ParseTransferConfig([]byte(`{"kv_connector": "memory", "kv_connector_extra_config": {
		"above_float": 9007199254740993, "max": 9223372036854775807, "min": -9223372036854775808,
		"umax": 18446744073709551615, "nested": {"n": 9007199254740993}}}`))
	require.NoError(t, err)
	var opts struct {
		AboveFloat int64  `json:"above_float"`
		Max        int64  `json:"max"`
		Min        int64  `json:"min"`
		UMax       uint64 `json:"umax"`
		Nested     any    `json:"nested"`
	}
	require.NoError(t, kv.DecodeExtra(cfg.Extra, &opts))
	assert.Equal(t, int64(9007199254740993), opts.AboveFloat, "2^53+1 is not a float64")
	assert.Equal(t, int64(9223372036854775807), opts.Max)
	assert.Equal(t, int64(-9223372036854775808), opts.Min)
	assert.Equal(t, uint64(18446744073709551615), opts.UMax)
	assert.Equal(t, map[string]any{"n": json.Number("9007199254740993")}, opts.Nested, "untyped numbers keep their digits")

	// Go values a host puts in Extra itself decode exactly too.
	var direct struct {
		N int64 `json:"n"`
	}
	require.NoError(t, kv.DecodeExtra(map[string]any{"n": int64(9007199254740993)}, &direct))
	assert.Equal(t, int64(9007199254740993), direct.N)

	// One past the maximum is an error, not a rounded value.
	cfg, err = kv.ParseTransferConfig([]byte(`{"kv_connector": "memory", "kv_connector_extra_config": {"max": 9223372036854775808}}`))
	require.NoError(t, err)
	assert.ErrorContains(t, kv.DecodeExtra(cfg.Extra, &opts), "kv_connector_extra_config: max: got JSON number 9223372036854775808, want an integer")
}

func TestDurationEdges(t *testing.T) {
	d := kv.Duration(time.Minute)
	require.NoError(t, d.UnmarshalJSON([]byte(`null`)))
	assert.Equal(t, kv.Duration(time.Minute), d, "null leaves the value alone, as encoding/json does")

	// Through DecodeExtra too, from a parsed config.
	opts := cacheOptions{TTL: kv.Duration(time.Minute)}
	cfg, err := kv.ParseTransferConfig([]byte(`{"kv_connector": "memory", "kv_connector_extra_config": {"ttl": null}}`))
	require.NoError(t, err)
	require.NoError(t, kv.DecodeExtra(cfg.Extra, &opts))
	assert.Equal(t, kv.Duration(time.Minute), opts.TTL)

	for in, want := range map[string]time.Duration{
		`0`:                    0,
		`0e-999999999`:         0,
		`-0.0`:                 0,
		`"0s"`:                 0,
		`1e-9`:                 time.Nanosecond,
		`0.0015`:               1500 * time.Microsecond,
		`9223372036.854775807`: time.Duration(math.MaxInt64),
		`-2`:                   -2 * time.Second,
		`"2562047h"`:           2562047 * time.Hour,
	} {
		require.NoError(t, d.UnmarshalJSON([]byte(in)), in)
		assert.Equal(t, kv.Duration(want), d, in)
	}

	for in, want := range map[string]string{
		`1e-10`:        `duration 1e-10 seconds: rounds to zero: want 0 or at least 1ns`,
		`"0.1ns"`:      `duration "0.1ns": rounds to zero: want 0 or at least 1ns`,
		`1e20`:         `duration 1e20 seconds: out of range: want at most 2562047h47m16.854775807s`,
		`9223372037`:   `duration 9223372037 seconds: out of range: want at most 2562047h47m16.854775807s`,
		`"3000000h"`:   `duration "3000000h": out of range: want at most 2562047h47m16.854775807s`,
		`"1 minute"`:   `duration "1 minute": want a Go duration such as "500ms" or "2s", or a number of seconds`,
		`{"s": 1}`:     `duration {"s":1}: want a string such as "2s" or a number of seconds`,
		`"2562048h"`:   `duration "2562048h": out of range: want at most 2562047h47m16.854775807s`,
		`"5minutes"`:   `duration "5minutes": want a Go duration such as "500ms" or "2s", or a number of seconds`,
		`"-3000000h"`:  `duration "-3000000h": out of range: want at most 2562047h47m16.854775807s`,
		`1e999999999`:  `duration 1e999999999 seconds: out of range: want at most 2562047h47m16.854775807s`,
		`-1e999999999`: `duration -1e999999999 seconds: out of range: want at most 2562047h47m16.854775807s`,
		`1e-999999999`: `duration 1e-999999999 seconds: rounds to zero: want 0 or at least 1ns`,
	} {
		d := kv.Duration(time.Second)
		assert.EqualError(t, d.UnmarshalJSON([]byte(in)), want, in)
		assert.Equal(t, kv.Duration(time.Second), d, "a failed decode leaves the value: %s", in)
	}

	// Errors from DecodeExtra name the key.
	err = kv.DecodeExtra(map[string]any{"ttl": 1e20}, &opts)
	assert.EqualError(t, err, `kv_connector_extra_config: ttl: duration 100000000000000000000 seconds: out of range: want at most 2562047h47m16.854775807s`)
}

// boundedOptions bound their values with min and max tags.
type boundedOptions struct {
	Seconds  int           `json:"seconds" min:"1" max:"86400"`
	Bytes    uint64        `json:"bytes" max:"1073741824"`
	Ratio    float64       `json:"ratio" min:"0" max:"1"`
	Timeout  kv.Duration   `json:"timeout" min:"1ms" max:"1h"`
	Wait     time.Duration `json:"wait" min:"0s"`
	Hosts    []string      `json:"hosts" min:"1" max:"2"`
	Name     string        `json:"name" max:"8"`
	Optional *int          `json:"optional" min:"0"`
	Bounded
}

// Bounded is embedded: its tags apply as its keys do, beside the others'.
type Bounded struct {
	Depth int `json:"depth" max:"3"`
}

// A value outside a field's min and max tags is an error naming the key and
// what is wanted; values within them, null and missing keys are accepted.
// Operators' settings are not trusted: a connector that multiplies or
// allocates by a setting relies on this.
func TestDecodeExtraRanges(t *testing.T) {
	opts := boundedOptions{Seconds: 600, Timeout: kv.Duration(time.Second)}
	require.NoError(t, kv.DecodeExtra(map[string]any{
		"seconds": 86400, "bytes": 1 << 30, "ratio": 0.5, "timeout": "1h", "wait": 0,
		"hosts": []any{"a", "b"}, "name": "eight888", "optional": 0, "depth": 3,
	}, &opts))
	assert.Equal(t, 86400, opts.Seconds)
	require.NoError(t, kv.DecodeExtra(map[string]any{"seconds": nil, "optional": nil}, &opts), "null is no value to check")
	// null leaves a list, map or pointer as it was, as it does a number:
	// encoding/json alone would make it nil, past its min.
	require.NoError(t, kv.DecodeExtra(map[string]any{"hosts": nil}, &opts))
	assert.Equal(t, []string{"a", "b"}, opts.Hosts)

	// A setting is counted at its own length, not as HTML escaping would
	// make it (a < is six bytes escaped).
	big := strings.Repeat("<", kv.MaxTransferConfigBytes/2)
	var free struct {
		Note string `json:"note"`
	}
	require.NoError(t, kv.DecodeExtra(map[string]any{"note": big}, &free))
	assert.Equal(t, big, free.Note)

	for extra, want := range map[string]string{
		`{"seconds": 9300000000}`:          "seconds 9300000000: want from 1 to 86400",
		`{"seconds": 9223372036854775807}`: "seconds 9223372036854775807: want from 1 to 86400",
		`{"seconds": 0}`:                   "seconds 0: want from 1 to 86400",
		`{"seconds": -1}`:                  "seconds -1: want from 1 to 86400",
		`{"bytes": 1073741825}`:            "bytes 1073741825: want at most 1073741824",
		`{"ratio": 1.5}`:                   "ratio 1.5: want from 0 to 1",
		`{"timeout": "2h"}`:                "timeout 2h0m0s: want from 1ms to 1h",
		`{"timeout": 0}`:                   "timeout 0s: want from 1ms to 1h",
		`{"wait": -1}`:                     "wait -1ns: want at least 0s",
		`{"hosts": []}`:                    "hosts has 0 entries: want from 1 to 2",
		`{"hosts": ["a", "b", "c"]}`:       "hosts has 3 entries: want from 1 to 2",
		`{"name": "ninebytes"}`:            "name has 9 bytes: want at most 8",
		`{"optional": -5}`:                 "optional -5: want at least 0",
		`{"depth": 4}`:                     "depth 4: want at most 3",
	} {
		cfg, err := kv.ParseTransferConfig([]byte(`{"kv_connector": "x", "kv_connector_extra_config": ` + extra + `}`))
		require.NoError(t, err)
		before := opts
		assert.EqualError(t, kv.DecodeExtra(cfg.Extra, &opts), "kv_connector_extra_config: "+want, extra)
		opts = before
	}

	// Every key out of range is reported at once.
	err := kv.DecodeExtra(map[string]any{"seconds": 0, "depth": 9}, &opts)
	assert.EqualError(t, err, "kv_connector_extra_config: depth 9: want at most 3\n"+
		"kv_connector_extra_config: seconds 0: want from 1 to 86400")

	// A tag that does not parse, or on a type it cannot bound, is the
	// connector author's mistake, reported as such.
	var badTag struct {
		N int `json:"n" max:"ten"`
	}
	assert.ErrorContains(t, kv.DecodeExtra(map[string]any{"n": 1}, &badTag),
		`kv.DecodeExtra: field N: max tag "ten"`)
	var badType struct {
		B bool `json:"b" min:"1"`
	}
	assert.ErrorContains(t, kv.DecodeExtra(map[string]any{"b": true}, &badType),
		"kv.DecodeExtra: field B: min and max do not apply to bool")
}
