package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvgen/kvgen/registry/kv"
)

// request returns a request whose prompt of n tokens is unique to the
// subtest, the tag and the run.
func (s *suite) request(t testing.TB, tag string, n int) *kv.Request {
	h := sha256.New()
	_ = binary.Write(h, binary.LittleEndian, s.salt)
	fmt.Fprintf(h, "%s\x00%s", t.Name(), tag)
	rng := rand.New(rand.NewChaCha8([32]byte(h.Sum(nil))))
	tokens := make([]uint32, n)
	for i := range tokens {
		tokens[i] = rng.Uint32N(1 << 17) // a vocabulary's worth of ids
	}
	return &kv.Request{ID: t.Name() + "/" + tag, PromptTokens: tokens}
}

// kvBytes returns size bytes of KV for one layer of the first numTokens
// tokens of req. They are derived from the prefix and the layer, so that
// KV saved for another prefix or layer never compares equal.
func kvBytes(req *kv.Request, numTokens int, layer string, size int) []byte {
	h := sha256.New()
	_ = binary.Write(h, binary.LittleEndian, uint64(numTokens))
	_ = binary.Write(h, binary.LittleEndian, req.PromptTokens[:numTokens])
	h.Write([]byte(layer))
	kvData := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte(h.Sum(nil))).Read(kvData) // never fails
	return kvData
}

// layerSize is the KV size of the i-th layer for a base size: the layers
// differ in length too, so a mixed-up layer cannot go unnoticed.
func layerSize(base, i int) int { return base + i }

// saveLayers saves the KV of layers for the first numTokens tokens of req
// and waits for the saves.
func saveLayers(ctx context.Context, w kv.Worker, req *kv.Request, numTokens, base int, layers []string) error {
	for i, l := range layers {
		kvData := kvBytes(req, numTokens, l, layerSize(base, i))
		if err := w.SaveLayer(ctx, req, l, numTokens, kvData); err != nil {
			return fmt.Errorf("SaveLayer(%s, %q, %d tokens): %w", req.ID, l, numTokens, err)
		}
	}
	if err := w.WaitForSave(ctx); err != nil {
		return fmt.Errorf("WaitForSave: %w", err)
	}
	return nil
}

// checkLayers loads the layers saved by saveLayers and compares them.
func checkLayers(ctx context.Context, w kv.Worker, req *kv.Request, numTokens, base int, layers []string) error {
	var errs []error
	for i, l := range layers {
		got, err := w.LoadLayer(ctx, req, l, numTokens)
		if err != nil {
			errs = append(errs, fmt.Errorf("LoadLayer(%s, %q, %d tokens): %w", req.ID, l, numTokens, err))
			continue
		}
		if d := diffBytes(kvBytes(req, numTokens, l, layerSize(base, i)), got); d != "" {
			errs = append(errs, fmt.Errorf("LoadLayer(%s, %q, %d tokens) returned other KV than was saved: %s", req.ID, l, numTokens, d))
		}
	}
	return errors.Join(errs...)
}

// diffBytes describes where got differs from want, or returns "" if they
// are equal. It names the first differing offset instead of dumping
// megabytes.
func diffBytes(want, got []byte) string {
	n := min(len(want), len(got))
	i := 0
	for i < n && want[i] == got[i] {
		i++
	}
	if i == n && len(want) == len(got) {
		return ""
	}
	excerpt := func(b []byte) string {
		if i >= len(b) {
			return "end of data"
		}
		return fmt.Sprintf("% x", b[i:min(i+8, len(b))])
	}
	return fmt.Sprintf("want %d bytes, got %d; first difference at offset %d: want %s, got %s",
		len(want), len(got), i, excerpt(want), excerpt(got))
}
