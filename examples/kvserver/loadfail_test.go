package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// blockStore keeps each layer's KV block by block, so that a load can fail
// for some blocks only: the connector vLLM's per-block load errors are for.
type blockStore struct {
	mu     sync.Mutex
	blocks map[string][]byte // block hash + layer
	bad    map[int]bool      // block indexes whose loads fail
}

type blockConn struct {
	st *blockStore
	p  kv.Prefixes
}

func (c *blockConn) key(req *kv.Request, i int, layer string) string {
	return fmt.Sprint(c.p.Hashes(req.PromptTokens)[i], layer)
}

func (c *blockConn) MatchedTokens(_ context.Context, req *kv.Request, _ int) (int, error) {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	n := 0
	for i := range c.p.Hashes(req.PromptTokens) {
		if _, ok := c.st.blocks[c.key(req, i, "model.layers.0.self_attn")]; !ok {
			break
		}
		n = (i + 1) * c.p.BlockSize()
	}
	return n, nil
}
func (c *blockConn) AfterAlloc(context.Context, *kv.Request, int) error { return nil }
func (c *blockConn) RequestFinished(context.Context, *kv.Request) error { return nil }
func (c *blockConn) SaveLayer(_ context.Context, req *kv.Request, layer string, n int, kvData []byte) error {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	per := len(kvData) / (n / c.p.BlockSize())
	for i := range n / c.p.BlockSize() {
		c.st.blocks[c.key(req, i, layer)] = append([]byte(nil), kvData[i*per:(i+1)*per]...)
	}
	return nil
}
func (c *blockConn) LoadLayer(_ context.Context, req *kv.Request, layer string, n int) ([]byte, error) {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	var kvData []byte
	for i := range n / c.p.BlockSize() {
		b, ok := c.st.blocks[c.key(req, i, layer)]
		if !ok || c.st.bad[i] {
			return nil, &kv.LoadError{Layer: layer, FirstBlock: i, EndBlock: n / c.p.BlockSize(), BlockSize: c.p.BlockSize(), Err: fmt.Errorf("block %d unreadable", i)}
		}
		kvData = append(kvData, b...)
	}
	return kvData, nil
}
func (c *blockConn) WaitForSave(context.Context) error { return nil }
func (c *blockConn) Finished(_ context.Context, f []string) ([]string, []string, error) {
	return f, f, nil
}
func (c *blockConn) Close() error { return nil }

func blockRegistry(st *blockStore) *kv.Registry {
	return kv.MustNew(kv.Entry{Name: "blocks", Factory: func(_ context.Context, cfg kv.Config, _ kv.Role) (kv.Connector, error) {
		p, err := cfg.Prefixes()
		return &blockConn{st: st, p: p}, err
	}})
}

// A load that fails from block 3 on keeps blocks 0 to 2 under recompute,
// and under fail names blocks 3 to 5.
func TestDecodeRecomputesOnlyFailedBlocks(t *testing.T) {
	st := &blockStore{blocks: map[string][]byte{}, bad: map[int]bool{3: true}}
	reg := blockRegistry(st)
	code, _, stderr := runWith(t, reg, "-kv-transfer-config", `{"kv_connector":"blocks"}`, "prefill")
	require.Equal(t, 0, code, stderr)

	code, out, stderr := runWith(t, reg, "-json", "-kv-transfer-config", `{"kv_connector":"blocks","kv_load_failure_policy":"recompute"}`, "decode")
	require.Equal(t, 0, code, stderr)
	var d decodeReport
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Equal(t, decodeReport{Connector: "blocks", Engine: d.Engine, Prompt: 100, Matched: 96, Loaded: 48, Recomputed: 52, Verified: true, FailedBlocks: []int{3, 6}}, d)

	code, _, stderr = runWith(t, reg, "-kv-transfer-config", `{"kv_connector":"blocks","kv_load_failure_policy":"fail"}`, "decode")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `loading "model.layers.0.self_attn": blocks 3 to 5 (tokens 48 to 95) failed`)
	assert.Contains(t, stderr, "(kv_load_failure_policy is fail)")
}
