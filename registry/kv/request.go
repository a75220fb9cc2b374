package kv

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Request is an inference request as connectors see it.
type Request struct {
	// ID identifies the request within its engine.
	ID string
	// PromptTokens are the prompt's token ids.
	PromptTokens []uint32
}

// BlockHash identifies a block-aligned token prefix. Like vLLM's prefix
// caching, it is chained: the hash of a block covers its parent block's hash
// and its own tokens, so equal hashes mean equal prefixes, not just equal
// blocks.
type BlockHash [sha256.Size]byte

// String returns the hash in hex, the form connectors use in keys and paths.
func (h BlockHash) String() string { return hex.EncodeToString(h[:]) }

// Uint64 returns the hash as the 64-bit number routers index blocks by:
// the low 64 bits of the digest (its last 8 bytes, big-endian), or 1 when
// they are all zero, since routers read 0 as "no parent block". It is
// never 0.
func (h BlockHash) Uint64() uint64 {
	if n := binary.BigEndian.Uint64(h[len(h)-8:]); n != 0 {
		return n
	}
	return 1
}

// Prefixes names the block-aligned prefixes of prompts for one model and
// block size: the keys connectors store KV under. A prefix's hash covers the
// model, so two named models never share a key, even in one shared store;
// an empty model name is one unnamed model. Get one
// from [Config.Prefixes] when the connector is created.
type Prefixes struct {
	blockSize int
	// seed is the parent of a prompt's first block: zero when no model is
	// named, so that such keys are what they were before models were.
	seed BlockHash
}

// NewPrefixes returns the prefixes of model's prompts in blocks of
// blockSize tokens, which must be from 1 to [MaxBlockSize].
func NewPrefixes(model string, blockSize int) (Prefixes, error) {
	if err := checkBlockSize(blockSize); err != nil {
		return Prefixes{}, fmt.Errorf("block size %d: %w", blockSize, err)
	}
	p := Prefixes{blockSize: blockSize}
	if model != "" {
		// Domain-separated, so that no token block can hash to it.
		p.seed = sha256.Sum256([]byte("kvgen model\x00" + model))
	}
	return p, nil
}

// Prefixes returns the prefixes of the configured model's prompts in blocks
// of the configured size. Connectors key KV by them, which keeps each
// model's KV apart; it fails if the block size is out of range, before
// anything is allocated for it.
func (c Config) Prefixes() (Prefixes, error) { return NewPrefixes(c.Model, c.BlockSize) }

// BlockSize returns the number of tokens in a block.
func (p Prefixes) BlockSize() int { return p.blockSize }

// Hashes returns the chained hashes of the full blocks of tokens: the i-th
// hash identifies the prefix tokens[:(i+1)*BlockSize()]. A trailing partial
// block has no hash.
func (p Prefixes) Hashes(tokens []uint32) []BlockHash {
	if p.blockSize <= 0 {
		return nil
	}
	n := len(tokens) / p.blockSize
	if n == 0 {
		return nil
	}
	out := make([]BlockHash, n)
	h := sha256.New()
	// Tokens go to the hash through a fixed buffer, so that memory does
	// not grow with the block size.
	var buf [1024]byte
	parent := p.seed
	for i := range n {
		h.Reset()
		h.Write(parent[:])
		block := tokens[i*p.blockSize : (i+1)*p.blockSize]
		for len(block) > 0 {
			m := min(len(block), len(buf)/4)
			for j, t := range block[:m] {
				binary.LittleEndian.PutUint32(buf[4*j:], t)
			}
			h.Write(buf[:4*m])
			block = block[m:]
		}
		h.Sum(parent[:0])
		out[i] = parent
	}
	return out
}

// Hash returns the hash of the first numTokens tokens, which must be a
// positive multiple of the block size no longer than tokens.
func (p Prefixes) Hash(tokens []uint32, numTokens int) (BlockHash, error) {
	if err := CheckPrefix(len(tokens), p.blockSize, numTokens); err != nil {
		return BlockHash{}, err
	}
	h := p.Hashes(tokens[:numTokens])
	return h[len(h)-1], nil
}

// CheckPrefix reports whether a prefix of numTokens tokens can be saved or
// loaded for a prompt of promptLen tokens: a positive multiple of the block
// size, no longer than the prompt. Connectors call it so that every
// connector rejects the same mistakes the same way.
func CheckPrefix(promptLen, blockSize, numTokens int) error {
	switch {
	case blockSize <= 0 || blockSize > MaxBlockSize:
		return fmt.Errorf("block size %d: %w", blockSize, checkBlockSize(blockSize))
	case numTokens <= 0:
		return fmt.Errorf("prefix of %d tokens: want at least one block of %d", numTokens, blockSize)
	case numTokens%blockSize != 0:
		return fmt.Errorf("prefix of %d tokens is not aligned to the block size %d", numTokens, blockSize)
	case numTokens > promptLen:
		return fmt.Errorf("prefix of %d tokens is longer than the prompt (%d tokens)", numTokens, promptLen)
	}
	return nil
}

// Matched answers Scheduler.MatchedTokens for a connector that can tell
// whether it holds a prefix: it asks stored about the prompt's block-aligned
// prefixes, longest first, down to numComputed, and returns how many tokens
// of the first one held lie beyond numComputed.
func (p Prefixes) Matched(ctx context.Context, req *Request, numComputed int, stored func(BlockHash) (bool, error)) (int, error) {
	if numComputed < 0 {
		return 0, fmt.Errorf("%d computed tokens: want zero or more", numComputed)
	}
	hashes := p.Hashes(req.PromptTokens)
	for n := len(hashes); n > 0 && n*p.blockSize > numComputed; n-- {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		ok, err := stored(hashes[n-1])
		if err != nil {
			return 0, err
		}
		if ok {
			return n*p.blockSize - numComputed, nil
		}
	}
	return 0, nil
}
