package kv_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// appender is a worker that loads into the caller's buffer, and counts how
// often it was asked to.
type appender struct {
	kv.Worker
	appends int
}

func (a *appender) AppendLayer(ctx context.Context, req *kv.Request, layer string, numTokens int, dst []byte) ([]byte, error) {
	a.appends++
	kvData, err := a.LoadLayer(ctx, req, layer, numTokens)
	if err != nil {
		return dst, err
	}
	return append(dst, kvData...), nil
}

func TestAppendLayer(t *testing.T) {
	f := newMultiFixture()
	ctx := t.Context()
	c, err := f.reg.Create(ctx, kv.Config{Connector: "local", BlockSize: 4}, kv.RoleWorker)
	require.NoError(t, err)
	w := c.(kv.Worker)
	require.NoError(t, w.SaveLayer(ctx, prompt, "layer.0", 8, []byte("kv")))

	for name, w := range map[string]kv.Worker{"LoadLayer": w, "LayerAppender": &appender{Worker: w}} {
		t.Run(name, func(t *testing.T) {
			dst := append(make([]byte, 0, 16), "held:"...)
			got, err := kv.AppendLayer(ctx, w, prompt, "layer.0", 8, dst)
			require.NoError(t, err)
			assert.Equal(t, "held:kv", string(got))
			assert.Same(t, &dst[0], &got[0], "appended in place when dst has room")

			got, err = kv.AppendLayer(ctx, w, prompt, "layer.0", 8, nil)
			require.NoError(t, err)
			assert.Equal(t, "kv", string(got))

			got, err = kv.AppendLayer(ctx, w, prompt, "layer.9", 8, dst)
			require.ErrorIs(t, err, kv.ErrMiss)
			assert.Equal(t, "held:", string(got), "a miss returns dst as it was")

			if a, ok := w.(*appender); ok {
				assert.Equal(t, 3, a.appends, "the worker's own AppendLayer serves every call")
			}
		})
	}
}

func TestMultiConnectorAppendLayer(t *testing.T) {
	f := newMultiFixture()
	ctx := t.Context()
	w := f.create(t, multiOf(`{"kv_connector": "local"}`, `{"kv_connector": "remote"}`), kv.RoleWorker).(kv.Worker)
	require.Implements(t, (*kv.LayerAppender)(nil), w)
	remote, err := f.reg.Create(ctx, kv.Config{Connector: "remote", BlockSize: 4}, kv.RoleWorker)
	require.NoError(t, err)
	require.NoError(t, remote.(kv.Worker).SaveLayer(ctx, prompt, "layer.1", 8, []byte("remote only")))

	dst := append(make([]byte, 0, 32), "held:"...)
	got, err := kv.AppendLayer(ctx, w, prompt, "layer.1", 8, dst)
	require.NoError(t, err)
	assert.Equal(t, "held:remote only", string(got), "loaded from the child that has it, after dst's bytes")

	got, err = kv.AppendLayer(ctx, w, prompt, "layer.9", 8, dst)
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.Equal(t, "held:", string(got))
}
