package kv_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// evil clears a terminal and forges a second error line.
const evil = "\x1b[2J\nkvserver: forged error"

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// assertOneCleanLine checks that err is one line of printable characters:
// no escape sequence reaches a terminal, and no line is forged.
func assertOneCleanLine(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	assert.NotContains(t, msg, "\n", "a second line was forged: %q", msg)
	for _, r := range msg {
		require.True(t, strconv.IsPrint(r), "%q reaches the terminal raw in %q", r, msg)
	}
}

// Every string an operator supplies is shown quoted in errors, whatever it
// holds: escape sequences, newlines, C1 controls such as U+009B (CSI),
// DEL and bidirectional overrides, which JSON strings may hold raw.
func TestUserStringsAreQuotedInErrors(t *testing.T) {
	raw := "\u009b2J\u007f\u202e" // valid in a JSON string as they are
	parse := func(config string) error {
		_, err := kv.ParseTransferConfig([]byte(config))
		return err
	}
	cases := map[string]func() error{
		"unknown key":           func() error { return parse(`{"kv_connector":"m",` + jsonString(evil) + `:1}`) },
		"kv_role":               func() error { return parse(`{"kv_connector":"m","kv_role":` + jsonString(evil) + `}`) },
		"kv_role, raw controls": func() error { return parse(`{"kv_connector":"m","kv_role":"` + raw + `"}`) },
		"policy, raw controls":  func() error { return parse(`{"kv_connector":"m","kv_load_failure_policy":"` + raw + `"}`) },
		"kv_buffer_device":      func() error { return parse(`{"kv_connector":"m","kv_buffer_device":["` + raw + `"]}`) },
		"module path":           func() error { return parse(`{"kv_connector":"m","kv_connector_module_path":` + jsonString(evil) + `}`) },
		"module path's connector": func() error {
			return parse(`{"kv_connector":` + jsonString(evil) + `,"kv_connector_module_path":"a.b"}`)
		},
		"module path's connector, raw": func() error {
			return parse(`{"kv_connector":"` + raw + `","kv_connector_module_path":"a.b"}`)
		},
		"unknown connector": func() error {
			_, err := kv.MustNew(entry("memory")).Create(t.Context(), kv.Config{Connector: evil, BlockSize: 4}, kv.RoleWorker)
			return err
		},
		"unknown extra key": func() error {
			var opts struct {
				Path string `json:"path"`
			}
			return kv.DecodeExtra(map[string]any{evil: 1}, &opts)
		},
		"extra value": func() error {
			var opts struct {
				Timeout kv.Duration `json:"timeout"`
			}
			return kv.DecodeExtra(map[string]any{"timeout": evil + raw}, &opts)
		},
		"role": func() error {
			_, err := kv.ParseRole(evil)
			return err
		},
		"MultiConnector child": func() error {
			f := newMultiFixture()
			cfg, err := kv.ParseTransferConfig([]byte(multiOf(`{"kv_connector":` + jsonString(evil) + `}`)))
			require.NoError(t, err)
			_, err = f.reg.Create(t.Context(), cfg, kv.RoleWorker)
			return err
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			assertOneCleanLine(t, f())
		})
	}

	assert.Equal(t, `"\x1b[2J\nkvserver: forged error"`, kv.Quote(evil))
	assert.Equal(t, `"`+strings.Repeat("x", 64)+`"... (100 bytes)`, kv.Quote(strings.Repeat("x", 100)))
}
