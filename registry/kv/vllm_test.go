package kv_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry"
	"github.com/kvgen/kvgen/registry/kv"
)

// TestVLLMConfigs parses --kv-transfer-config values written the way vLLM's
// own docs and examples write them (each case names the file of vLLM's
// repository it follows) and checks that they mean what they mean in vLLM.
func TestVLLMConfigs(t *testing.T) {
	rank := func(n int) *int { return &n }
	tests := []struct {
		name, source, config string
		check                func(t *testing.T, cfg kv.Config)
	}{
		{
			name:   "ExampleConnector under its former name",
			source: "examples/offline_inference/disaggregated-prefill-v1/decode_example.py",
			config: `{"kv_connector":"SharedStorageConnector","kv_role":"kv_both","kv_connector_extra_config": {"shared_storage_path": "local_storage"}}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.Equal(t, "SharedStorageConnector", cfg.Connector)
				assert.Equal(t, kv.KVBoth, cfg.KVRole)
				assert.Equal(t, map[string]any{"shared_storage_path": "local_storage"}, cfg.Extra)
			},
		},
		{
			name:   "MultiConnector of NIXL and shared storage",
			source: "docs/features/disagg_prefill.md",
			config: `{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"ExampleConnector","kv_role":"kv_both","kv_connector_extra_config":{"shared_storage_path":"local_storage"}}]}}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.Equal(t, "MultiConnector", cfg.Connector)
				children, ok := cfg.Extra["connectors"].([]any)
				require.True(t, ok, "connectors is a list: %#v", cfg.Extra)
				assert.Len(t, children, 2)
			},
		},
		{
			name:   "NIXL with backends and buffer device",
			source: "docs/features/disagg_prefill.md",
			config: `{"kv_connector":"NixlConnector","kv_role":"kv_both", "kv_buffer_device":"cuda", "kv_connector_extra_config":{"backends":["UCX", "GDS"]}}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.Equal(t, "cuda", cfg.KVBufferDevice)
				assert.Equal(t, map[string]any{"backends": []any{"UCX", "GDS"}}, cfg.Extra)
			},
		},
		{
			name:   "CPU offloading with its own block size setting",
			source: "docs/features/disagg_prefill.md",
			config: `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"block_size": 64, "num_cpu_blocks": 1000}}`,
			check: func(t *testing.T, cfg kv.Config) {
				// The block size inside the extra settings is the
				// connector's, not the engine's.
				assert.Equal(t, kv.DefaultBlockSize, cfg.BlockSize)
				var opts struct {
					BlockSize    int   `json:"block_size"`
					NumCPUBlocks int64 `json:"num_cpu_blocks"`
				}
				require.NoError(t, kv.DecodeExtra(cfg.Extra, &opts))
				assert.Equal(t, 64, opts.BlockSize)
				assert.Equal(t, int64(1000), opts.NumCPUBlocks)
			},
		},
		{
			name:   "NIXL prefiller with the fail policy",
			source: "docs/features/nixl_connector_usage.md",
			config: `{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.Equal(t, kv.KVProducer, cfg.KVRole)
				assert.Equal(t, kv.PolicyFail, cfg.LoadFailurePolicy)
			},
		},
		{
			name:   "NIXL decoder written over several lines",
			source: "docs/features/nixl_connector_usage.md",
			config: "{\n    \"kv_connector\":\"NixlConnector\",\n    \"kv_role\":\"kv_both\",\n    \"kv_connector_extra_config\":{\"backends\":[\"LIBFABRIC\"]}\n  }",
			check: func(t *testing.T, cfg kv.Config) {
				assert.Equal(t, "NixlConnector", cfg.Connector)
				assert.Equal(t, map[string]any{"backends": []any{"LIBFABRIC"}}, cfg.Extra)
			},
		},
		{
			name:   "permuted layout flag written as a string",
			source: "docs/features/nixl_connector_usage.md",
			config: `{"kv_connector":"NixlConnector","kv_role":"kv_consumer","enable_permute_local_kv":"True"}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.True(t, cfg.EnablePermuteLocalKV)
			},
		},
		{
			name:   "NIXL lease duration in seconds",
			source: "docs/features/nixl_connector_usage.md",
			config: `{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config": {"kv_lease_duration": 60}}`,
			check: func(t *testing.T, cfg kv.Config) {
				var opts struct {
					Lease kv.Duration `json:"kv_lease_duration"`
				}
				require.NoError(t, kv.DecodeExtra(cfg.Extra, &opts))
				assert.Equal(t, "1m0s", opts.Lease.String())
			},
		},
		{
			name:   "P2P NCCL prefill with size and port as strings",
			source: "docs/design/p2p_nccl_connector.md",
			config: `{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_buffer_size":"1e1","kv_port":"21001","kv_connector_extra_config":{"proxy_ip":"10.0.1.1","proxy_port":"30001","http_port":"20001"}}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.Equal(t, 10.0, cfg.KVBufferSize)
				assert.Equal(t, 21001, cfg.KVPort)
				assert.Equal(t, "127.0.0.1", cfg.KVIP, "vLLM's default")
				assert.Nil(t, cfg.KVRank)
				assert.Equal(t, map[string]any{"proxy_ip": "10.0.1.1", "proxy_port": "30001", "http_port": "20001"}, cfg.Extra)
			},
		},
		{
			name:   "P2P NCCL decode",
			source: "docs/design/p2p_nccl_connector.md",
			config: `{"kv_connector":"P2pNcclConnector","kv_role":"kv_consumer","kv_buffer_size":"8e9","kv_port":"22001","kv_connector_extra_config":{"proxy_ip":"10.0.1.1","proxy_port":"30001","http_port":"20002"}}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.Equal(t, kv.KVConsumer, cfg.KVRole)
				assert.Equal(t, 8e9, cfg.KVBufferSize)
				assert.Equal(t, 22001, cfg.KVPort)
			},
		},
		{
			name:   "typed fields as vllm/config/kv_transfer.py declares them",
			source: "vllm/config/kv_transfer.py",
			config: `{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer","kv_rank":0,"kv_parallel_size":2,"kv_ip":"10.0.0.2","kv_port":14580,"kv_buffer_size":5e9,"kv_buffer_device":"cpu","engine_id":"prefill-0"}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.Equal(t, rank(0), cfg.KVRank)
				assert.Equal(t, 2, cfg.KVParallelSize)
				assert.Equal(t, "10.0.0.2", cfg.KVIP)
				assert.Equal(t, 14580, cfg.KVPort)
				assert.Equal(t, 5e9, cfg.KVBufferSize)
				assert.Equal(t, "cpu", cfg.KVBufferDevice)
				assert.Equal(t, "prefill-0", cfg.EngineID)
			},
		},
		{
			name:   "optional fields set to null keep their defaults",
			source: "vllm/config/kv_transfer.py",
			config: `{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_rank":null,"engine_id":null,"kv_connector_module_path":null}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.Nil(t, cfg.KVRank)
				assert.NotEmpty(t, cfg.EngineID, "a null engine id gets a random one, as in vLLM")
			},
		},
		{
			name:   "pydantic's lax conversions",
			source: "vllm/config/kv_transfer.py",
			config: `{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_rank":"1","kv_parallel_size":2.0,"kv_port":" 14_579 ","kv_buffer_size":true,"enable_permute_local_kv":1}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.Equal(t, rank(1), cfg.KVRank)
				assert.Equal(t, 2, cfg.KVParallelSize)
				assert.Equal(t, 14579, cfg.KVPort)
				assert.Equal(t, 1.0, cfg.KVBufferSize)
				assert.True(t, cfg.EnablePermuteLocalKV)
			},
		},
		{
			name:   "the recompute policy",
			source: "docs/features/nixl_connector_usage.md",
			config: `{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_load_failure_policy":"recompute"}`,
			check: func(t *testing.T, cfg kv.Config) {
				assert.Equal(t, kv.PolicyRecompute, cfg.LoadFailurePolicy)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := kv.ParseTransferConfig([]byte(tt.config))
			require.NoError(t, err, "vLLM accepts this config from %s", tt.source)
			tt.check(t, cfg)
		})
	}
}

// TestVLLMRejects checks that values vLLM's validation rejects are rejected,
// with an error that names the key and says what is wanted.
func TestVLLMRejects(t *testing.T) {
	tests := []struct{ name, config, want string }{
		{"word for a port", `{"kv_connector":"NixlConnector","kv_port":"not-a-port"}`,
			`kv_port "not-a-port": want an integer`},
		{"fraction for a rank", `{"kv_connector":"NixlConnector","kv_rank":1.5}`,
			`kv_rank 1.5: want an integer`},
		{"fraction in a string", `{"kv_connector":"NixlConnector","kv_parallel_size":"2.5"}`,
			`kv_parallel_size "2.5": want an integer`},
		{"null parallel size", `{"kv_connector":"NixlConnector","kv_parallel_size":null}`,
			`kv_parallel_size null: want an integer`},
		{"number for an address", `{"kv_connector":"NixlConnector","kv_ip":127}`,
			`kv_ip 127: want a string`},
		{"null buffer device", `{"kv_connector":"NixlConnector","kv_buffer_device":null}`,
			`kv_buffer_device null: want a string`},
		{"word for a size", `{"kv_connector":"NixlConnector","kv_buffer_size":"big"}`,
			`kv_buffer_size "big": want a number`},
		{"word for a flag", `{"kv_connector":"NixlConnector","enable_permute_local_kv":"maybe"}`,
			`enable_permute_local_kv "maybe": want true or false`},
		{"two for a flag", `{"kv_connector":"NixlConnector","enable_permute_local_kv":2}`,
			`enable_permute_local_kv 2: want true or false`},
		{"unknown role", `{"kv_connector":"NixlConnector","kv_role":"kv_prefill"}`,
			`kv_role "kv_prefill": want "kv_producer", "kv_consumer" or "kv_both"`},
		{"unknown policy", `{"kv_connector":"NixlConnector","kv_load_failure_policy":"retry"}`,
			`kv_load_failure_policy "retry": want "recompute" or "fail"`},
		{"null policy", `{"kv_connector":"NixlConnector","kv_load_failure_policy":null}`,
			`kv_load_failure_policy null: want "recompute" or "fail"`},
		{"null extra settings", `{"kv_connector":"NixlConnector","kv_connector_extra_config":null}`,
			`kv_connector_extra_config null: want an object`},
		{"number for a connector", `{"kv_connector":1}`,
			`kv_connector 1: want a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kv.ParseTransferConfig([]byte(tt.config))
			assert.EqualError(t, err, "kv transfer config: "+tt.want)
		})
	}
}

func TestCreateVLLMConnectorName(t *testing.T) {
	fs := kv.Entry{
		Name: "filesystem", ImportPath: "github.com/kvgen/kvgen/examples/connectors/filesystem", Constructor: "New",
		Factory: storeFactory(newKVStore()),
	}
	create := func(r *kv.Registry, name string) error {
		_, err := r.Create(t.Context(), kv.Config{Connector: name, BlockSize: 4}, kv.RoleWorker)
		var unknown *registry.UnknownNameError
		require.ErrorAs(t, err, &unknown)
		return err
	}

	// vLLM's name for a connector this package has no equivalent of: the
	// registry knows nothing of the connectors it may be given, so it says
	// how to serve the name.
	r := kv.MustNew(fs, entry("memory"))
	assert.EqualError(t, create(r, "SharedStorageConnector"), `unknown kv connector "SharedStorageConnector"; `+
		`linked: filesystem, memory; SharedStorageConnector is vLLM's name for its example connector that shares KV through files (now ExampleConnector), `+
		`which is Python and cannot be linked into a Go binary; `+
		`to serve the name, add a Go connector to connectors.yaml as - {name: SharedStorageConnector, import: IMPORT/PATH} `+
		`or give a linked one the alias (aliases: [SharedStorageConnector]), and regenerate`)

	// Not linked: show the entry that links it.
	r = kv.MustNew(entry("memory"))
	assert.EqualError(t, create(r, "MultiConnector"), `unknown kv connector "MultiConnector"; linked: memory; `+
		`MultiConnector is vLLM's name for its composite connector; kvgen's github.com/kvgen/kvgen/registry/kv.NewMultiConnector does the same: `+
		`to link it, add - {name: MultiConnector, import: github.com/kvgen/kvgen/registry/kv, constructor: NewMultiConnector} `+
		`to connectors.yaml and regenerate`)

	// A Python-only connector: say so, and how a Go one would take the name.
	assert.EqualError(t, create(r, "NixlConnector"), `unknown kv connector "NixlConnector"; linked: memory; `+
		`NixlConnector is vLLM's name for its NIXL transfer connector, which is Python and cannot be linked into a Go binary; `+
		`to serve the name, add a Go connector to connectors.yaml as - {name: NixlConnector, import: IMPORT/PATH} `+
		`or give a linked one the alias (aliases: [NixlConnector]), and regenerate`)

	// Every name vLLM registers gets the hint.
	for _, name := range []string{"ExampleConnector", "OffloadingConnector", "P2pNcclConnector", "LMCacheConnectorV1",
		"LMCacheMPConnector", "MooncakeConnector", "MoRIIOConnector", "FlexKVConnectorV1", "DecodeBenchConnector"} {
		assert.Contains(t, create(r, name).Error(), name+" is vLLM's name for ", name)
	}
}

func TestLongBadValuesAreCutShort(t *testing.T) {
	long := strings.Repeat("é", 5000)
	for _, config := range []string{
		`{"kv_connector":"x","kv_role":"` + long + `"}`,
		`{"kv_connector":"x","kv_load_failure_policy":"` + long + `"}`,
		`{"kv_connector":"x","kv_port":"` + long + `"}`,
		`{"kv_connector":"x","kv_buffer_size":"` + long + `"}`,
		`{"kv_connector":"` + long + `","kv_connector_module_path":"` + long + `"}`,
	} {
		_, err := kv.ParseTransferConfig([]byte(config))
		require.Error(t, err)
		assert.Less(t, len(err.Error()), 600, "the message repeats a bounded part of the value")
		assert.Contains(t, err.Error(), "... (10002 bytes)")
		assert.True(t, utf8.ValidString(err.Error()), "cut at a rune boundary")
	}
}
