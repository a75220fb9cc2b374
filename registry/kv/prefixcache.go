package kv

import (
	"slices"
	"sync"
)

// PrefixCache computes prefix hashes as [Prefixes.Hash] does, and remembers
// the last few, so that the layers of a request, saved or loaded one at a
// time, hash its prompt once rather than once a layer: with 32 layers of
// 64 KiB, hashing the prompt for every layer took a sixth of the memory
// connector's processor time. It compares the tokens themselves, never the
// slice's address, so a prompt changed in place is hashed anew. It keeps a
// copy of the last 8 prefixes it hashed. It is safe for concurrent use.
type PrefixCache struct {
	prefixes Prefixes
	mu       sync.Mutex
	recent   [8]cachedPrefix
	next     int
}

type cachedPrefix struct {
	tokens []uint32
	hash   BlockHash
}

// Cache returns a PrefixCache of p's prefixes.
func (p Prefixes) Cache() *PrefixCache { return &PrefixCache{prefixes: p} }

// Hash returns the hash of the first numTokens tokens, as [Prefixes.Hash].
func (c *PrefixCache) Hash(tokens []uint32, numTokens int) (BlockHash, error) {
	if err := CheckPrefix(len(tokens), c.prefixes.blockSize, numTokens); err != nil {
		return BlockHash{}, err
	}
	prefix := tokens[:numTokens]
	c.mu.Lock()
	for _, e := range c.recent {
		if e.tokens != nil && slices.Equal(e.tokens, prefix) {
			c.mu.Unlock()
			return e.hash, nil
		}
	}
	c.mu.Unlock()
	h, err := c.prefixes.Hash(tokens, numTokens)
	if err != nil {
		return h, err
	}
	c.mu.Lock()
	c.recent[c.next] = cachedPrefix{tokens: slices.Clone(prefix), hash: h}
	c.next = (c.next + 1) % len(c.recent)
	c.mu.Unlock()
	return h, nil
}
