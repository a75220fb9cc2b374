package kv_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry"
	"github.com/kvgen/kvgen/registry/kv"
)

// hugeName is an operator's input far longer than any real name, in a
// config within MaxTransferConfigBytes.
var hugeName = strings.Repeat("A", 512<<10)

// Errors about a long input name it by its first bytes and its length, not
// whole: an error line must stay readable and cheap to log.
func TestLongInputsAreShortenedInErrors(t *testing.T) {
	const want = `"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"... (524288 bytes)`
	cases := map[string]func() error{
		"unknown transfer-config key": func() error {
			_, err := kv.ParseTransferConfig([]byte(`{"kv_connector":"memory","` + hugeName + `":1}`))
			return err
		},
		"kv_role": func() error {
			_, err := kv.ParseTransferConfig([]byte(`{"kv_connector":"memory","kv_role":"` + hugeName + `"}`))
			return err
		},
		"kv_load_failure_policy": func() error {
			_, err := kv.ParseTransferConfig([]byte(`{"kv_connector":"memory","kv_load_failure_policy":"` + hugeName + `"}`))
			return err
		},
		"unknown extra key": func() error {
			var opts struct {
				Path string `json:"shared_storage_path"`
			}
			return kv.DecodeExtra(map[string]any{hugeName: 1}, &opts)
		},
		"unknown connector": func() error {
			_, err := kv.MustNew(entry("memory")).Create(t.Context(), kv.Config{Connector: hugeName}, kv.RoleWorker)
			return err
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			err := f()
			require.Error(t, err)
			if strings.HasPrefix(name, "kv_") {
				// A bad value is shown as the JSON it was, cut short.
				assert.Contains(t, err.Error(), `"`+hugeName[:63]+`... (524290 bytes)`)
			} else {
				assert.Contains(t, err.Error(), want)
			}
			assert.Less(t, len(err.Error()), 400, "the error must not echo the input whole")
		})
	}
}

// The error value keeps the whole name for programs that inspect it.
func TestUnknownConnectorErrorKeepsTheName(t *testing.T) {
	_, err := kv.MustNew(entry("memory")).Create(t.Context(), kv.Config{Connector: hugeName}, kv.RoleWorker)
	var unknown *registry.UnknownNameError
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, hugeName, unknown.Name)
	assert.Empty(t, unknown.Suggestions)
}
