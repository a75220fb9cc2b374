package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/connectors/filesystem"
	"github.com/kvgen/kvgen/registry/kv"
)

func runServer(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runWith(t, Registry, args...)
}

// runWith runs kvserver as a build linking reg would.
func runWith(t *testing.T, reg *kv.Registry, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), reg, args, &out, &errb)
	return code, out.String(), errb.String()
}

func fsConfig(dir, engine string, extra string) string {
	return fmt.Sprintf(`{"kv_connector":"ExampleConnector","engine_id":%q,"kv_connector_extra_config":{"shared_storage_path":%q}%s}`, engine, dir, extra)
}

func TestHandoffThroughSharedDirectory(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runServer(t, "-json", "-tokens", "100", "-kv-transfer-config", fsConfig(dir, "prefill-0", ""), "prefill")
	require.Equal(t, 0, code, stderr)
	var p prefillReport
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	assert.Equal(t, prefillReport{Connector: "ExampleConnector", Engine: "prefill-0", Prompt: 100, Saved: 96, Layers: 4}, p)

	code, out, stderr = runServer(t, "-json", "-tokens", "100", "-kv-transfer-config", fsConfig(dir, "decode-0", ""), "decode")
	require.Equal(t, 0, code, stderr)
	var d decodeReport
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Equal(t, decodeReport{Connector: "ExampleConnector", Engine: "decode-0", Prompt: 100, Matched: 96, Loaded: 96, Recomputed: 4, Verified: true}, d)

	// Another prompt shares nothing with the saved one.
	code, out, _ = runServer(t, "-json", "-prompt", "something else entirely", "-kv-transfer-config", fsConfig(dir, "decode-1", ""), "decode")
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Equal(t, 0, d.Loaded)
	assert.Equal(t, 100, d.Recomputed)
}

func TestDemoKeepsConnectorsForBothSteps(t *testing.T) {
	code, out, stderr := runServer(t, "demo")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `saved 96 of 100 prompt tokens x 4 layers through "memory"`)
	assert.Contains(t, out, `loaded 96 tokens and recomputed 4 of 100 through "memory"; every loaded byte verified: true`)
}

func TestListConnectors(t *testing.T) {
	code, out, _ := runServer(t, "-list-connectors", "-json")
	require.Equal(t, 0, code)
	var items []listed
	require.NoError(t, json.Unmarshal([]byte(out), &items))
	var names []string
	for _, it := range items {
		names = append(names, it.Name)
		assert.Equal(t, "github.com/kvgen/kvgen", it.Module)
		assert.Equal(t, []string{"scheduler", "worker"}, it.Roles)
	}
	assert.Equal(t, []string{"memory", "filesystem", "MultiConnector"}, names, "manifest order")
	assert.Equal(t, []string{"ExampleConnector", "SharedStorageConnector"}, items[1].Aliases, "vLLM's names for it")
}

func TestConfigErrors(t *testing.T) {
	code, _, stderr := runServer(t, "-kv-transfer-config", `{"kv_connector":"memry"}`, "demo")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `unknown kv connector "memry" (did you mean "memory"?)`)

	code, _, stderr = runServer(t, "-kv-transfer-config", `{"kv_conector":"memory"}`, "demo")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown key "kv_conector" (did you mean "kv_connector"?)`)

	code, _, stderr = runServer(t, "frobnicate")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown mode "frobnicate"`)
}

func TestLoadFailurePolicy(t *testing.T) {
	dir := t.TempDir()
	// Nothing saved: the scheduler promises nothing, so both policies
	// recompute everything without error.
	for _, policy := range []string{"recompute", "fail"} {
		code, out, stderr := runServer(t, "-json", "-kv-transfer-config", fsConfig(dir, "d", `,"kv_load_failure_policy":"`+policy+`"`), "decode")
		require.Equal(t, 0, code, stderr)
		var d decodeReport
		require.NoError(t, json.Unmarshal([]byte(out), &d))
		assert.Equal(t, 100, d.Recomputed, policy)
	}
	// A shared directory that cannot be created fails the connector's
	// construction, whatever the policy.
	code, _, stderr := runServer(t, "-kv-transfer-config", fsConfig("/dev/null/kv", "d", ""), "decode")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `kv connector "filesystem" (scheduler)`)
}

func TestComputeKVIsDeterministicAndPrefixStable(t *testing.T) {
	tokens := tokenize("a b c", 40)
	assert.Equal(t, computeKV(tokens, "l0"), computeKV(tokens, "l0"))
	assert.NotEqual(t, computeKV(tokens, "l0"), computeKV(tokens, "l1"))
	// A token's KV depends on what precedes it, not on what follows.
	assert.Equal(t, computeKV(tokens[:16], "l0"), computeKV(tokens, "l0")[:16*kvBytesPerToken])
	assert.Len(t, computeKV(tokens, "l0"), 40*kvBytesPerToken)
}

func TestPrefixRuleForEveryPromptLength(t *testing.T) {
	// Saved and looked-up prefixes agree for lengths that are multiples of
	// the block size (16, 64) and lengths that are not, under the default
	// fail policy: the last prompt token is always recomputed, as in vLLM.
	for _, bs := range []int{16, 5} {
		for n := 2; n <= 4*bs+1; n++ {
			cfg := fmt.Sprintf(`{"kv_connector":"memory","block_size":%d,"kv_connector_extra_config":{"store":%q}}`, bs, t.Name())
			code, out, stderr := runServer(t, "-json", "-tokens", fmt.Sprint(n), "-kv-transfer-config", cfg, "demo")
			want := (n - 1) / bs * bs
			if want == 0 {
				assert.Equal(t, 1, code, "block size %d, %d tokens", bs, n)
				assert.Contains(t, stderr, "no full block of", "block size %d, %d tokens", bs, n)
				continue
			}
			require.Equal(t, 0, code, "block size %d, %d tokens: %s", bs, n, stderr)
			var r demoReport
			require.NoError(t, json.Unmarshal([]byte(out), &r))
			assert.Equal(t, want, r.Prefill.Saved, "block size %d, %d tokens", bs, n)
			assert.Equal(t, want, r.Decode.Matched, "block size %d, %d tokens", bs, n)
			assert.Equal(t, want, r.Decode.Loaded, "block size %d, %d tokens", bs, n)
			assert.Equal(t, n-want, r.Decode.Recomputed, "block size %d, %d tokens", bs, n)
			assert.True(t, r.Decode.Verified)
		}
	}
}

func TestDemoOfWholeBlocksHandsKVOver(t *testing.T) {
	code, out, stderr := runServer(t, "-tokens", "64", "demo")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `saved 48 of 64 prompt tokens x 4 layers through "memory"`)
	assert.Contains(t, out, `loaded 48 tokens and recomputed 16 of 64 through "memory"; every loaded byte verified: true`)
}

func TestModelsKeepKVApart(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runServer(t, "-model", "org/model-a", "-kv-transfer-config", fsConfig(dir, "prefill-0", ""), "prefill")
	require.Equal(t, 0, code, stderr)

	// Another model over the same directory finds nothing of model a's.
	code, out, stderr := runServer(t, "-json", "-model", "org/model-b", "-kv-transfer-config", fsConfig(dir, "decode-0", ""), "decode")
	require.Equal(t, 0, code, stderr)
	var d decodeReport
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Zero(t, d.Matched, "model b must not see model a's KV")
	assert.Equal(t, 100, d.Recomputed)

	code, out, stderr = runServer(t, "-json", "-model", "org/model-a", "-kv-transfer-config", fsConfig(dir, "decode-1", ""), "decode")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Equal(t, 96, d.Loaded, "model a sees its own KV")
}

func TestVLLMNames(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"kv_connector":"SharedStorageConnector","kv_role":"kv_both","kv_connector_extra_config":{"shared_storage_path":"` + dir + `"}}`
	code, out, stderr := runServer(t, "-kv-transfer-config", cfg, "demo")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `loaded 96 tokens and recomputed 4 of 100 through "SharedStorageConnector"`)

	code, _, stderr = runServer(t, "-kv-transfer-config", `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`, "demo")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `NixlConnector is vLLM's name for its NIXL transfer connector, which is Python and cannot be linked into a Go binary`)

	code, _, stderr = runServer(t, "-kv-transfer-config", `{"kv_connector":"LMCacheConnectorV1","kv_connector_module_path":"lmcache.integration.vllm.lmcache_connector_v1"}`, "demo")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `kv_connector_module_path "lmcache.integration.vllm.lmcache_connector_v1": a Go binary cannot load connectors at run time`)
}

func TestArgumentsAfterTheModeAreRejected(t *testing.T) {
	dir := t.TempDir()
	// The flag package stops at the mode: this config would be ignored and
	// the default connector run, so it is an error instead.
	code, out, stderr := runServer(t, "demo", "-kv-transfer-config", fsConfig(dir, "e", ""))
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Equal(t, "kvserver: flag \"-kv-transfer-config\" after the mode \"demo\": flags go before the mode\n", stderr)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing ran")

	code, _, stderr = runServer(t, "prefill", "decode")
	assert.Equal(t, 2, code)
	assert.Equal(t, "kvserver: one mode at most, got [\"prefill\" \"decode\"]\n", stderr)
}

func TestHelpListsModes(t *testing.T) {
	code, out, stderr := runServer(t, "-h")
	assert.Equal(t, 0, code)
	assert.Empty(t, out)
	for _, want := range []string{
		"usage:\n  kvserver [flags] [MODE]\n",
		"\n  demo     prefill, then decode, in one process (the default)\n",
		"\n  prefill  ",
		"\n  decode   ",
		"\n  -kv-transfer-config string\n",
		"\nexample:\n  kvserver -kv-transfer-config ",
	} {
		assert.Contains(t, stderr, want)
	}
}

func TestCreationsAreLoggedOnlyWhenVerbose(t *testing.T) {
	code, _, stderr := runServer(t, "demo")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr, "a host prints nothing per connector unless asked")

	code, _, stderr = runServer(t, "-v", "demo")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, 2, strings.Count(stderr, "level=DEBUG msg=\"kv connector created\" connector=memory"), stderr)
}

// Settings out of range fail the connector's construction with an error
// that names the key, instead of crashing the host: 9300000000 seconds
// overflows time.Duration, and used to panic the filesystem connector's
// sweeper with a negative ticker interval.
func TestOutOfRangeSettingsAreErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ extra, want string }{
		{`"stale_temp_seconds":9300000000`, "stale_temp_seconds 9300000000: want from 1 to 31536000"},
		{`"stale_temp_seconds":9223372036854775807`, "stale_temp_seconds 9223372036854775807: want from 1 to 31536000"},
		{`"stale_temp_seconds":-1`, "stale_temp_seconds -1: want from 1 to 31536000"},
		{`"max_layer_bytes":-1`, "max_layer_bytes -1: want from 1 to 1099511627776"},
		{`"max_layer_bytes":9223372036854775807`, "max_layer_bytes 9223372036854775807: want from 1 to 1099511627776"},
		{`"max_bytes_per_token":0`, "max_bytes_per_token 0: want from 1 to 1073741824"},
		{`"max_bytes_per_token":1073741825`, "max_bytes_per_token 1073741825: want from 1 to 1073741824"},
	} {
		config := fmt.Sprintf(`{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":%q,%s}}`, dir, c.extra)
		code, _, stderr := runServer(t, "-kv-transfer-config", config, "demo")
		assert.Equal(t, 1, code, c.extra)
		assert.Contains(t, stderr, c.want, c.extra)
	}
	for _, c := range []struct{ config, want string }{
		{`{"kv_connector":"memory","kv_connector_extra_config":{"capacity_bytes":-1}}`, "capacity_bytes -1: want from 1 to 1099511627776"},
		{`{"kv_connector":"memory","kv_connector_extra_config":{"capacity_bytes":1000000000000000000}}`, "capacity_bytes 1000000000000000000: want from 1 to 1099511627776"},
		{`{"kv_connector":"MultiConnector","kv_connector_extra_config":{"connectors":[` +
			`{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":"` + dir + `","stale_temp_seconds":9300000000}}]}}`,
			"stale_temp_seconds 9300000000: want from 1 to 31536000"},
	} {
		code, _, stderr := runServer(t, "-kv-transfer-config", c.config, "demo")
		assert.Equal(t, 1, code, c.config)
		assert.Contains(t, stderr, c.want, c.config)
	}
}

// A setting holding an escape sequence and a newline is shown quoted: the
// terminal is not cleared, and the error stays one line that no one can
// take for two.
func TestErrorsAreOneQuotedLine(t *testing.T) {
	evil := `\u001b[2J\nkvserver: forged error`
	for _, config := range []string{
		fmt.Sprintf(`{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":%q,"durability":"%s"}}`, t.TempDir(), evil),
		fmt.Sprintf(`{"kv_connector":"filesystem","kv_connector_extra_config":{"shared_storage_path":"/dev/null/%s"}}`, evil),
		`{"kv_connector":"memory","kv_connector_extra_config":{"store":"` + evil + `","capacity_bytes":1}}`,
		`{"kv_connector":"memory","layer_names":["` + evil + `"],"kv_connector_extra_config":{"store":"tiny","capacity_bytes":1}}`,
		`{"kv_connector":"` + evil + `","kv_connector_module_path":"m"}`,
	} {
		code, _, stderr := runServer(t, "-kv-transfer-config", config, "demo")
		assert.NotZero(t, code, config)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "%s: %q", config, stderr)
		assert.NotContains(t, stderr, "\x1b", config)
	}
}

// -tokens takes the bounds a serve step takes: a prompt of 50,000,000
// tokens once ended in an out-of-memory throw and a stack dump, and one of
// -5 was taken for the prompt's own length.
func TestTokensFlagIsBounded(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-tokens", "-5"}, "kvserver: -tokens -5: want from 1 to 1048576 (-max-prompt-tokens)\n"},
		{[]string{"-tokens", "0"}, "kvserver: -tokens 0: want from 1 to 1048576 (-max-prompt-tokens)\n"},
		{[]string{"-tokens", "50000000"}, "kvserver: -tokens 50000000: want from 1 to 1048576 (-max-prompt-tokens)\n"},
		{[]string{"-max-prompt-tokens", "64", "-tokens", "65"}, "kvserver: -tokens 65: want from 1 to 64 (-max-prompt-tokens)\n"},
	} {
		code, out, stderr := runServer(t, append(c.args, "prefill")...)
		require.Equal(t, 2, code, "%q: %s", c.args, stderr)
		assert.Empty(t, out)
		assert.Equal(t, c.want, stderr)
	}
	code, _, stderr := runServer(t, "-max-prompt-tokens", "64", "-tokens", "64", "demo")
	require.Equal(t, 0, code, stderr)
}

// Limits out of range are refused, each named, before anything runs.
func TestLimitFlagsAreChecked(t *testing.T) {
	code, _, stderr := runServer(t, "-max-conns", "0", "-read-timeout", "-1s", "-max-prompt-tokens", "100", "-max-tokens-in-flight", "99", "serve")
	assert.Equal(t, 2, code)
	assert.Equal(t, "kvserver: -max-conns 0: want at least 1; -max-tokens-in-flight 99: want at least -max-prompt-tokens (100); -read-timeout -1s: want more than 0\n", stderr)
}

// A filesystem connector's loads are bounded by the layer kvserver
// expects, 128 bytes a token: a file in the shared directory that passes
// every check but holds more is a miss, not KV. A layer one byte longer
// once loaded, and the decode failed comparing it with recomputation.
func TestLoadsAreBoundedByTheLayerKVServerExpects(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	// Valid files, written by a connector that takes any size.
	w, err := filesystem.New(ctx, kv.Config{BlockSize: 16, Extra: map[string]any{
		"shared_storage_path": dir, "max_bytes_per_token": 1 << 20,
	}}, kv.RoleWorker)
	require.NoError(t, err)
	req := &kv.Request{ID: "r", PromptTokens: tokenize("a long prompt", 100)}
	for i := range 4 {
		layer := fmt.Sprintf("model.layers.%d.self_attn", i)
		require.NoError(t, w.SaveLayer(ctx, req, layer, 96, append(computeKV(req.PromptTokens[:96], layer), 0)))
	}
	require.NoError(t, w.Close())

	code, out, stderr := runServer(t, "-json", "-prompt", "a long prompt", "-kv-transfer-config", fsConfig(dir, "d", `,"kv_load_failure_policy":"recompute"`), "decode")
	require.Equal(t, 0, code, stderr)
	var d decodeReport
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Equal(t, 0, d.Loaded)
	assert.Equal(t, 100, d.Recomputed)
	assert.Contains(t, stderr, "12289 bytes of KV, more than the 12288 a load of 96 tokens may take (max_bytes_per_token 128)")

	// A setting of the operator's own is kept: 127 bytes a token makes a
	// miss of kvserver's own layers.
	code, _, stderr = runServer(t, "-prompt", "a long prompt", "-tokens", "100", "-kv-transfer-config", fsConfig(dir, "p", ""), "prefill")
	require.Equal(t, 0, code, stderr)
	cfg := fmt.Sprintf(`{"kv_connector":"ExampleConnector","kv_load_failure_policy":"recompute","kv_connector_extra_config":{"shared_storage_path":%q,"max_bytes_per_token":127}}`, dir)
	code, out, stderr = runServer(t, "-json", "-prompt", "a long prompt", "-kv-transfer-config", cfg, "decode")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Equal(t, 0, d.Loaded)
	assert.Contains(t, stderr, "12288 bytes of KV, more than the 12192 a load of 96 tokens may take (max_bytes_per_token 127)")
}
