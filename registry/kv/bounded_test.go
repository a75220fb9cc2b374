package kv_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// unknownKeys returns n distinct keys near enough to "kv_port" that each
// would get a "did you mean", as a JSON object's members.
func unknownKeys(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `"kv_port%d": 1,`, i)
	}
	return b.String()
}

// A config larger than MaxTransferConfigBytes is refused before it is
// parsed, with an error that states the limit; one of a million unknown
// keys once took 13 s and 3 GB.
func TestTransferConfigSizeIsBounded(t *testing.T) {
	pad := strings.Repeat(" ", kv.MaxTransferConfigBytes)
	start := time.Now()
	_, err := kv.ParseTransferConfig([]byte(`{"kv_connector": "memory"}` + pad))
	assert.EqualError(t, err, fmt.Sprintf("kv transfer config: %d bytes: want at most 1 MiB (1048576 bytes); a transfer config is a few hundred", 26+len(pad)))
	assert.Less(t, time.Since(start), time.Second)

	_, err = kv.ParseTransferConfig([]byte(`{"kv_connector": "memory"}` + pad[:kv.MaxTransferConfigBytes-26]))
	require.NoError(t, err, "a config of exactly the limit is parsed")

	// A connector's settings are held to the same bound.
	var opts struct {
		Path string `json:"path"`
	}
	err = kv.DecodeExtra(map[string]any{"path": strings.Repeat("p", kv.MaxTransferConfigBytes)}, &opts)
	assert.EqualError(t, err, "kv_connector_extra_config: more than 1048576 bytes in JSON: want at most 1 MiB; a connector's settings are a few hundred")
	assert.Empty(t, opts.Path)
}

// Thousands of bad keys are reported as the first MaxProblems and a count
// of the rest, and "did you mean" is looked for only for those shown.
func TestProblemsAreBounded(t *testing.T) {
	const n = 50_000
	start := time.Now()
	_, err := kv.ParseTransferConfig([]byte(`{` + unknownKeys(n) + `"kv_connector": "memory"}`))
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, kv.MaxProblems+1)
	assert.Equal(t, `kv transfer config: unknown key "kv_port0" (did you mean "kv_port"?)`, lines[0])
	assert.Equal(t, fmt.Sprintf("... and %d more problems", n-kv.MaxProblems), lines[kv.MaxProblems])
	assert.Less(t, time.Since(start), 5*time.Second)

	extra := map[string]any{}
	for i := range n {
		extra[fmt.Sprintf("pth%d", i)] = 1
	}
	var opts struct {
		Path string `json:"path"`
	}
	err = kv.DecodeExtra(extra, &opts)
	require.Error(t, err)
	lines = strings.Split(err.Error(), "\n")
	require.Len(t, lines, kv.MaxProblems+1)
	assert.Equal(t, fmt.Sprintf("... and %d more problems", n-kv.MaxProblems), lines[kv.MaxProblems])

	// Problems of values count against the same bound: 10 empty layer
	// names and more besides.
	_, err = kv.ParseTransferConfig([]byte(`{"kv_connector": "memory", "kv_port": "x",
		"layer_names": [` + strings.Repeat(`"", `, 20) + `""]}`))
	lines = strings.Split(err.Error(), "\n")
	require.Len(t, lines, kv.MaxProblems+1, err.Error())
	assert.Equal(t, "kv transfer config: kv_port \"x\": want an integer", lines[0])
	assert.Equal(t, "kv transfer config: layer_names[0] is empty", lines[1])
	assert.Equal(t, "... and 12 more problems", lines[kv.MaxProblems])
}

// A MultiConnector's children share their parent's bound.
func TestMultiConnectorProblemsAreBounded(t *testing.T) {
	f := newMultiFixture()
	children := make([]string, 30)
	for i := range children {
		children[i] = `{"kv_connector": "local", "kv_port": "x", "block_size": 0}`
	}
	_, err := f.createErr(t, multiOf(children...), kv.RoleWorker)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, kv.MaxProblems+1, err.Error())
	assert.Contains(t, lines[0], `connectors[0]: kv_port "x": want an integer`)
	assert.Equal(t, "... and 50 more problems", lines[kv.MaxProblems])
}

func TestProblems(t *testing.T) {
	var p kv.Problems
	require.NoError(t, p.Err(), "no problem, no error")
	p.Add(nil)
	require.NoError(t, p.Err())
	p.Add(kv.ErrMiss)
	assert.ErrorIs(t, p.Err(), kv.ErrMiss, "each problem is seen by errors.Is")
	assert.EqualError(t, p.Err(), kv.ErrMiss.Error())
	for range kv.MaxProblems {
		p.Add(fmt.Errorf("another"))
	}
	assert.True(t, p.Full())
	assert.True(t, strings.HasSuffix(p.Err().Error(), "\nanother\n... and 1 more problem"), p.Err().Error())

	// A list added to another is merged, with its count.
	var outer kv.Problems
	outer.Add(p.Err())
	assert.Equal(t, p.Err().Error(), outer.Err().Error())
}
