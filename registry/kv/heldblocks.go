package kv

import (
	"slices"
	"sync"
)

// HeldBlocks tracks the blocks a connector holds, for its events to mean
// what vLLM's mean. A connector stores KV by prefix and holds a block
// while some loadable prefix contains it; prefixes that share leading
// blocks hold them together, so each block is counted once for every
// prefix held that contains it. A connector calls Stored when a prefix
// becomes loadable and Removed when it stops being loadable, and
// HeldBlocks reports the blocks that changed: the blocks a store made
// held, chained to the block before them, and every block no longer held.
//
// It reports to the emit function each call is given, under its lock, so
// events reach emit in the order the calls changed what is held. It is
// safe for concurrent use; the zero value is not: get one from
// [Prefixes.HeldBlocks].
type HeldBlocks struct {
	prefixes Prefixes
	mu       sync.Mutex
	held     map[BlockHash][]BlockHash // a prefix held, by its key: its blocks
	refs     map[BlockHash]int         // a block held: the prefixes held that contain it
}

// HeldBlocks returns a HeldBlocks of p's prefixes that holds nothing.
func (p Prefixes) HeldBlocks() *HeldBlocks {
	return &HeldBlocks{prefixes: p, held: map[BlockHash][]BlockHash{}, refs: map[BlockHash]int{}}
}

// Stored records that the prefix of tokens, whose length must be a
// positive multiple of the block size, is loadable on medium. Unless it
// was held already, it reports to emit, if not nil, a BlockStored event
// of the blocks it made held: those beyond the longest run of its leading
// blocks already held, whose parent is the last block of that run (nil if
// there is none). If every block was held already, through a longer
// prefix, nothing is reported.
func (b *HeldBlocks) Stored(tokens []uint32, medium string, emit func(KVEvent)) {
	if CheckPrefix(len(tokens), b.prefixes.blockSize, len(tokens)) != nil {
		return
	}
	hashes := b.prefixes.Hashes(tokens)
	key := hashes[len(hashes)-1]
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.held[key]; ok {
		return
	}
	b.held[key] = hashes
	// The blocks held form whole prefixes, so the new ones follow the
	// last one held.
	first := 0
	for i, h := range hashes {
		if b.refs[h] > 0 {
			first = i + 1
		}
		b.refs[h]++
	}
	if emit == nil || first == len(hashes) {
		return
	}
	e := KVEvent{
		Kind:        BlockStored,
		BlockHashes: slices.Clone(hashes[first:]),
		TokenIDs:    slices.Clone(tokens),
		BlockSize:   b.prefixes.blockSize,
		Medium:      medium,
	}
	if first > 0 {
		parent := hashes[first-1]
		e.ParentBlockHash = &parent
	}
	emit(e)
}

// Removed records that the prefix whose key is prefix is no longer
// loadable from medium. If it was held, it reports to emit, if not nil, a
// BlockRemoved event of every block no longer held: the blocks of the
// prefix no other prefix held contains, in order. If another prefix holds
// them all, nothing is reported.
func (b *HeldBlocks) Removed(prefix BlockHash, medium string, emit func(KVEvent)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hashes, ok := b.held[prefix]
	if !ok {
		return
	}
	delete(b.held, prefix)
	var gone []BlockHash
	for _, h := range hashes {
		if b.refs[h]--; b.refs[h] == 0 {
			delete(b.refs, h)
			gone = append(gone, h)
		}
	}
	if emit != nil && len(gone) > 0 {
		emit(KVEvent{Kind: BlockRemoved, BlockHashes: gone, Medium: medium})
	}
}

// Cleared records that nothing is held any more and reports to emit, if
// not nil, an AllBlocksCleared event.
func (b *HeldBlocks) Cleared(emit func(KVEvent)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.held)
	clear(b.refs)
	if emit != nil {
		emit(KVEvent{Kind: AllBlocksCleared})
	}
}

// Holds reports whether the prefix whose key is prefix is held.
func (b *HeldBlocks) Holds(prefix BlockHash) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.held[prefix]
	return ok
}

// Blocks returns the number of blocks held.
func (b *HeldBlocks) Blocks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.refs)
}
