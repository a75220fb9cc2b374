package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvgen/kvgen/registry/kv"
)

// flushBytes is how many encoded bytes SaveLayer buffers before it queues
// them for writing. Below it, a request's layers go to Redis together at
// WaitForSave, in one round trip instead of one per layer; above it,
// encoding the next layers overlaps writing the last ones.
const flushBytes = 8 << 20

// maxQueued bounds the batches queued for writing in a lane: SaveLayer
// waits when there are more, so a producer faster than Redis holds at most
// about lanes*maxQueued*flushBytes (plus a layer per batch) of encoded KV.
const maxQueued = 2

// maxFailures bounds the failed writes kept for WaitForSave, should an
// engine never call it; the first ones say what went wrong.
const maxFailures = 16

// pendingSave is one layer's value waiting to be written.
type pendingSave struct {
	prefix kv.BlockHash
	layer  string
	value  []byte // encodeValue's output, owned by the connector
	// For stats and events, and only while someone reads them: when
	// SaveLayer was called, how many KV bytes it saved, and the prefix's
	// tokens.
	start  time.Time
	size   int
	tokens []uint32
}

// saveBatch is a set of saves written together.
type saveBatch struct {
	saves []pendingSave
	bytes int
	done  chan struct{} // closed once written or failed
	err   error         // set before done is closed
}

// lanes is the number of writer goroutines. A prefix always goes to the
// same one, which writes its batches in order, so a layer saved twice ends
// up with the later value; requests of different prefixes are written in
// parallel, as their own pipelines would be. One request's batches are
// never written at once: on a single-threaded server they would only
// interleave, and under load each waited past its read timeout for the
// others.
const lanes = 4

// lane is one writer's share of the saves.
type lane struct {
	open  *saveBatch   // filling up; nil when empty
	queue []*saveBatch // waiting for or being written, oldest first
	wake  chan struct{}
}

// saver buffers the connector's saves and hands them in batches to the
// writer goroutines.
type saver struct {
	mu     sync.Mutex
	lanes  [lanes]lane
	failed []*saveBatch // failed, not yet reported by WaitForSave
	stop   chan struct{}
	exited chan struct{} // closed once every writer has stopped
	// buffers holds encoding buffers between saves: allocating (and
	// zeroing, and later sweeping) a fresh one per layer cost a third of
	// a save's time at 64 KiB layers.
	buffers sync.Pool
}

func (s *saver) getBuffer() []byte {
	if p, ok := s.buffers.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return nil
}

func (s *saver) putBuffer(b []byte) { s.buffers.Put(&b) }

// startWriter starts the writer goroutines; stopWriter ends them.
func (c *connector) startWriter() {
	s := &c.saver
	s.stop = make(chan struct{})
	s.exited = make(chan struct{})
	var wg sync.WaitGroup
	for i := range s.lanes {
		l := &s.lanes[i]
		l.wake = make(chan struct{}, 1)
		wg.Go(func() {
			for {
				select {
				case <-s.stop:
					return
				case <-l.wake:
				}
				for {
					s.mu.Lock()
					if len(l.queue) == 0 {
						s.mu.Unlock()
						break
					}
					b := l.queue[0]
					s.mu.Unlock()
					// No caller's context: the client's write and read
					// timeouts bound the write.
					c.write(context.Background(), l, b)
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(s.exited)
	}()
}

func (c *connector) stopWriter() {
	close(c.saver.stop)
	<-c.saver.exited
}

// queueLocked queues l's open batch for its writer.
func (l *lane) queueLocked() {
	l.queue = append(l.queue, l.open)
	l.open = nil
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// SaveLayer stores kv under the layer's key and refreshes the prefix's
// marker. It encodes (copies) kv at once, so the caller may reuse it, and
// buffers the value with the other saves since the last write; the buffer
// is written once it holds flushBytes, or at WaitForSave, each prefix's
// layers and marker in one MULTI so that the marker never outlives a failed
// save of its layers. A failed write is reported by WaitForSave.
func (c *connector) SaveLayer(ctx context.Context, req *kv.Request, layer string, numTokens int, kvData []byte) error {
	start := c.stats.Start()
	h, err := c.prefix(req, layer, numTokens)
	if err != nil {
		c.stats.Failed(kv.ErrorSave)
		return err
	}
	err = ctx.Err()
	if c.closed.Load() {
		err = goredis.ErrClosed
	}
	if err != nil {
		c.stats.Failed(kv.ErrorSave)
		return fmt.Errorf("%s: save layer %s of %d tokens of request %s: %w", c.where, kv.Quote(layer), numTokens, kv.Quote(req.ID), err)
	}
	if limit := c.valueLimit(layer, numTokens); int64(fixedHeaderLen+len(layer)+len(kvData)) > limit {
		c.stats.Failed(kv.ErrorSave)
		return fmt.Errorf("%s: save layer %s of %d tokens of request %s: %d bytes of KV, more than max_layer_bytes (%d) or max_bytes_per_token (%d) allow",
			c.where, kv.Quote(layer), numTokens, kv.Quote(req.ID), len(kvData), c.opts.MaxLayerBytes, c.opts.MaxBytesPerToken)
	}
	value := encodeValue(c.saver.getBuffer(), h, layer, kvData)
	sv := pendingSave{prefix: h, layer: layer, value: value, start: start, size: len(kvData)}
	if c.emit.Get() != nil {
		sv.tokens = slices.Clone(req.PromptTokens[:numTokens])
	}
	s := &c.saver
	l := &s.lanes[int(h[0])%lanes]
	s.mu.Lock()
	if l.open == nil {
		l.open = &saveBatch{done: make(chan struct{})}
	}
	b := l.open
	b.saves = append(b.saves, sv)
	b.bytes += cap(value) // what the batch holds in memory, reused buffers included
	if b.bytes < flushBytes {
		s.mu.Unlock()
		return nil
	}
	l.queueLocked()
	var oldest *saveBatch
	if len(l.queue) > maxQueued {
		oldest = l.queue[0]
	}
	s.mu.Unlock()
	if oldest != nil {
		select {
		case <-oldest.done:
		case <-ctx.Done():
			return fmt.Errorf("%s: save layer %s of %d tokens of request %s: waiting for earlier writes: %w", c.where, kv.Quote(layer), numTokens, kv.Quote(req.ID), ctx.Err())
		case <-s.exited: // the save raced with Close: no writer is left to wait for
			return fmt.Errorf("%s: save layer %s of %d tokens of request %s: %w", c.where, kv.Quote(layer), numTokens, kv.Quote(req.ID), goredis.ErrClosed)
		}
	}
	return nil
}

// WaitForSave has what SaveLayer buffered written and waits until every
// batch queued so far is. It reports the failures of the batches it waited
// for and of any other that failed since a WaitForSave last reported.
func (c *connector) WaitForSave(ctx context.Context) error {
	s := &c.saver
	s.mu.Lock()
	var waited []*saveBatch
	for i := range s.lanes {
		l := &s.lanes[i]
		if l.open != nil {
			l.queueLocked()
		}
		waited = append(waited, l.queue...)
	}
	s.mu.Unlock()
	for _, b := range waited {
		select {
		case <-b.done:
		case <-ctx.Done():
			return fmt.Errorf("%s: wait for saves: %w", c.where, ctx.Err())
		case <-s.exited: // a save raced with Close
			return fmt.Errorf("%s: wait for saves: %w", c.where, goredis.ErrClosed)
		}
	}
	s.mu.Lock()
	for _, f := range s.failed {
		if !slices.Contains(waited, f) {
			waited = append(waited, f)
		}
	}
	s.failed = nil
	s.mu.Unlock()
	var errs []error
	for _, b := range waited {
		errs = append(errs, b.err)
	}
	return errors.Join(errs...)
}

// stored records that the prefix of tokens became loadable, after any
// check of its removal under way.
func (c *connector) stored(tokens []uint32, emit func(kv.KVEvent)) {
	c.eventsMu.Lock()
	defer c.eventsMu.Unlock()
	if c.held.Blocks() >= maxHeldBlocks {
		c.held.Cleared(emit)
	}
	c.held.Stored(tokens, kv.MediumRedis, emit)
}

// startWriting counts a transaction in flight for each of prefixes.
func (c *connector) startWriting(prefixes []kv.BlockHash) {
	c.racedMu.Lock()
	defer c.racedMu.Unlock()
	for _, h := range prefixes {
		c.writing[h]++
	}
}

// doneWriting ends a transaction of startWriting's, once its prefixes
// were reported stored, and returns those a removal was notified for
// while it was in flight: the key may have gone after the transaction
// wrote it, when held did not hold the prefix yet (watcher.removed), so
// only a check can tell.
func (c *connector) doneWriting(prefixes []kv.BlockHash) []kv.BlockHash {
	c.racedMu.Lock()
	defer c.racedMu.Unlock()
	var recheck []kv.BlockHash
	for _, h := range prefixes {
		if c.writing[h]--; c.writing[h] == 0 {
			delete(c.writing, h)
		}
		if c.raced[h] {
			delete(c.raced, h)
			recheck = append(recheck, h)
		}
	}
	return recheck
}

// write stores the batch and takes it off l's queue. On a single server
// it is one MULTI. A Redis Cluster runs a transaction within one slot
// only, and a prefix's keys share one, so there it is a MULTI per prefix,
// sent to their nodes at once.
func (c *connector) write(ctx context.Context, l *lane, b *saveBatch) {
	ttl := time.Duration(c.opts.TTL)
	groups := map[kv.BlockHash][]pendingSave{}
	var order []kv.BlockHash
	for _, sv := range b.saves {
		if _, ok := groups[sv.prefix]; !ok {
			order = append(order, sv.prefix)
		}
		groups[sv.prefix] = append(groups[sv.prefix], sv)
	}
	emit := c.emit.Get()
	tx := func(prefixes []kv.BlockHash) error {
		// With events asked for, the transaction counts each prefix's
		// keys before and after its writes: a prefix whose writes
		// completed it became loadable.
		var before, after []*goredis.IntCmd
		if emit != nil {
			c.startWriting(prefixes)
			defer func() {
				if recheck := c.doneWriting(prefixes); len(recheck) > 0 {
					c.checkLoadable(ctx, recheck)
				}
			}()
		}
		_, err := c.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			for _, h := range prefixes {
				if emit != nil {
					before = append(before, p.Exists(ctx, c.keysOf(h)...))
				}
				for _, sv := range groups[h] {
					p.Set(ctx, c.layerKey(h, sv.layer), sv.value, ttl)
				}
				p.Set(ctx, c.prefixKey(h), "", ttl)
				if emit != nil {
					after = append(after, p.Exists(ctx, c.keysOf(h)...))
				}
			}
			return nil
		})
		if err != nil {
			c.failed(err)
			for _, h := range prefixes {
				for range groups[h] {
					c.stats.Failed(kv.ErrorSave)
				}
			}
			return fmt.Errorf("%s: write %d layers of %d prefixes: %w", c.where, len(b.saves), len(prefixes), err)
		}
		want := int64(max(len(c.layers), 1))
		for i, h := range prefixes {
			c.reader.saved(h, groups[h])
			for _, sv := range groups[h] {
				c.stats.Saved(sv.start, sv.size)
			}
			if emit != nil && before[i].Val() < want && after[i].Val() == want {
				if sv := groups[h][0]; sv.tokens != nil {
					c.stored(sv.tokens, emit)
				}
			}
		}
		return nil
	}
	var err error
	if _, cluster := c.client.(*goredis.ClusterClient); !cluster || len(order) == 1 {
		err = tx(order)
	} else {
		errs := make([]error, len(order))
		var wg sync.WaitGroup
		for i, h := range order {
			wg.Go(func() { errs[i] = tx([]kv.BlockHash{h}) })
		}
		wg.Wait()
		err = errors.Join(errs...)
	}
	// go-redis has written the values and keeps no reference to them.
	for _, sv := range b.saves {
		c.saver.putBuffer(sv.value)
	}
	b.saves = nil
	s := &c.saver
	s.mu.Lock()
	l.queue = slices.DeleteFunc(l.queue, func(o *saveBatch) bool { return o == b })
	b.err = err
	if err != nil && len(s.failed) < maxFailures {
		s.failed = append(s.failed, b)
	}
	s.mu.Unlock()
	close(b.done)
}
