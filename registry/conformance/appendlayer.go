package conformance

import (
	"bytes"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// appendLayer checks a worker that is a [kv.LayerAppender]: it
// appends exactly what LoadLayer returns, after what dst holds, into dst's
// spare capacity when there is enough; on a miss it leaves dst's bytes
// alone; and it keeps no reference to the memory it filled.
func (s *suite) appendLayer(t *testing.T) {
	s.needWorker(t)
	ctx := t.Context()
	p := s.open(t, blockSize)
	a, ok := p.worker.(kv.LayerAppender)
	if !ok {
		t.Skip("the worker is not a kv.LayerAppender")
	}
	req := s.request(t, "prompt", 2*blockSize)
	layer := layerNames[0]
	want := kvBytes(req, 2*blockSize, layer, 4096)
	require.NoError(t, p.worker.SaveLayer(ctx, req, layer, 2*blockSize, want))
	require.NoError(t, p.worker.WaitForSave(ctx))

	head := []byte("held by the caller")
	dst := append(make([]byte, 0, len(head)+len(want)), head...)
	got, err := a.AppendLayer(ctx, req, layer, 2*blockSize, dst)
	require.NoError(t, err)
	require.Equal(t, head, got[:len(head)], "AppendLayer changed what dst held")
	require.Empty(t, diffBytes(want, got[len(head):]), "AppendLayer appended other bytes than were saved")
	assert.Same(t, &dst[0], &got[0], "AppendLayer allocated although dst had room")

	short, err := a.AppendLayer(ctx, req, layer, 2*blockSize, head[:len(head):len(head)])
	require.NoError(t, err)
	require.Empty(t, diffBytes(slices.Concat(head, want), short), "AppendLayer into a full dst")

	for i := range got {
		got[i] ^= 0xff
	}
	again, err := p.worker.LoadLayer(ctx, req, layer, 2*blockSize)
	require.NoError(t, err)
	require.Empty(t, diffBytes(want, again), "changing memory AppendLayer filled changed what the next load returns")

	t.Run("Miss", func(t *testing.T) {
		other := s.request(t, "never saved", 2*blockSize)
		dst := append(make([]byte, 0, 2*len(want)), head...)
		got, err := a.AppendLayer(ctx, other, layer, 2*blockSize, dst)
		require.ErrorIs(t, err, kv.ErrMiss)
		assert.True(t, bytes.Equal(head, got), "AppendLayer returned %d bytes with a miss, want dst as it was", len(got))
	})
}
