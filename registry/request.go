package registry

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

// BlockHashes returns the chained hashes of the full blocks of tokens: the
// i-th hash identifies the prefix tokens[:(i+1)*blockSize]. A trailing
// partial block has no hash. It panics if blockSize is not positive.
func BlockHashes(tokens []uint32, blockSize int) []BlockHash {
	if blockSize <= 0 {
		panic(fmt.Sprintf("registry.BlockHashes: block size %d", blockSize))
	}
	n := len(tokens) / blockSize
	out := make([]BlockHash, n)
	buf := make([]byte, len(BlockHash{})+4*blockSize)
	var parent BlockHash
	for i := range n {
		copy(buf, parent[:])
		b := buf[len(parent):]
		for j, t := range tokens[i*blockSize : (i+1)*blockSize] {
			binary.LittleEndian.PutUint32(b[4*j:], t)
		}
		parent = sha256.Sum256(buf)
		out[i] = parent
	}
	return out
}

// PrefixHash returns the hash of the first numTokens tokens, which must be a
// positive multiple of blockSize no longer than tokens.
func PrefixHash(tokens []uint32, blockSize, numTokens int) (BlockHash, error) {
	if err := CheckPrefix(len(tokens), blockSize, numTokens); err != nil {
		return BlockHash{}, err
	}
	h := BlockHashes(tokens[:numTokens], blockSize)
	return h[len(h)-1], nil
}

// CheckPrefix reports whether a prefix of numTokens tokens can be saved or
// loaded for a prompt of promptLen tokens: a positive multiple of the block
// size, no longer than the prompt. Connectors call it so that every
// connector rejects the same mistakes the same way.
func CheckPrefix(promptLen, blockSize, numTokens int) error {
	switch {
	case blockSize <= 0:
		return fmt.Errorf("block size %d: want a positive number of tokens", blockSize)
	case numTokens <= 0:
		return fmt.Errorf("prefix of %d tokens: want at least one block of %d", numTokens, blockSize)
	case numTokens%blockSize != 0:
		return fmt.Errorf("prefix of %d tokens is not aligned to the block size %d", numTokens, blockSize)
	case numTokens > promptLen:
		return fmt.Errorf("prefix of %d tokens is longer than the prompt (%d tokens)", numTokens, promptLen)
	}
	return nil
}

// MatchedTokens answers Scheduler.MatchedTokens for a connector that can
// tell whether it holds a prefix: it asks stored about the prompt's
// block-aligned prefixes, longest first, down to numComputed, and returns
// how many tokens of the first one held lie beyond numComputed.
func MatchedTokens(ctx context.Context, req *Request, blockSize, numComputed int, stored func(BlockHash) (bool, error)) (int, error) {
	if numComputed < 0 {
		return 0, fmt.Errorf("%d computed tokens: want zero or more", numComputed)
	}
	hashes := BlockHashes(req.PromptTokens, blockSize)
	for n := len(hashes); n > 0 && n*blockSize > numComputed; n-- {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		ok, err := stored(hashes[n-1])
		if err != nil {
			return 0, err
		}
		if ok {
			return n*blockSize - numComputed, nil
		}
	}
	return 0, nil
}
