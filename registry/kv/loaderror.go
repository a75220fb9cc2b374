package kv

import (
	"errors"
	"fmt"
)

// LoadError is the error LoadLayer returns when stored KV failed to load:
// it names the blocks of the prompt whose KV failed, as vLLM's
// get_block_ids_with_load_errors does, so that under the recompute policy
// an engine recomputes from the first failed block on and keeps the
// blocks before it, and under fail reports exactly what failed. The blocks
// before FirstBlock are not in question: reloading the prefix that ends
// there may succeed. A connector that stores a layer as one value reports
// every block of the prefix. errors.Is(err, ErrMiss) holds for a
// LoadError: the KV asked for is not returned.
type LoadError struct {
	// Layer is the layer whose KV failed to load.
	Layer string
	// FirstBlock and EndBlock bound the failed blocks, [FirstBlock,
	// EndBlock): block i holds the prompt's tokens [i*BlockSize,
	// (i+1)*BlockSize).
	FirstBlock, EndBlock int
	// BlockSize is the number of tokens in a block.
	BlockSize int
	// Err says why.
	Err error
}

// Error names the layer, the blocks and their tokens, and the cause.
func (e *LoadError) Error() string {
	return fmt.Sprintf("layer %s: blocks %d to %d (tokens %d to %d) failed to load: %v",
		Quote(e.Layer), e.FirstBlock, e.EndBlock-1, e.FirstBlock*e.BlockSize, e.EndBlock*e.BlockSize-1, e.Err)
}

// Unwrap returns the cause.
func (e *LoadError) Unwrap() error { return e.Err }

// Is reports that a LoadError is a miss.
func (e *LoadError) Is(target error) bool { return target == ErrMiss }

// FailedBlocks returns the blocks of a load of numTokens tokens that err,
// an error of LoadLayer, says failed: a [LoadError]'s, or every block of
// the prefix for any other error.
func FailedBlocks(err error, numTokens, blockSize int) (first, end int) {
	if le, ok := errors.AsType[*LoadError](err); ok {
		return le.FirstBlock, le.EndBlock
	}
	if blockSize <= 0 {
		return 0, 0
	}
	return 0, numTokens / blockSize
}
