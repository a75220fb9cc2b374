package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvgen/kvgen/registry"
)

// flushBytes is how many encoded bytes SaveLayer buffers before it starts
// writing them in the background. Below it, a request's layers go to Redis
// together at WaitForSave, in one round trip instead of one per layer;
// above it, encoding the next layers overlaps writing the last ones.
const flushBytes = 8 << 20

// maxWrites bounds the writes in the background: SaveLayer waits when
// there are more, so a producer faster than Redis holds at most about
// maxWrites*flushBytes (plus a layer per write) of encoded KV.
const maxWrites = 4

// maxFailures bounds the failed writes kept for WaitForSave, should an
// engine never call it; the first ones say what went wrong.
const maxFailures = 16

// pendingSave is one layer's value waiting to be written.
type pendingSave struct {
	prefix registry.BlockHash
	layer  string
	value  []byte // encodeValue's output, owned by the connector
}

// saveBatch is a set of saves written together.
type saveBatch struct {
	saves []pendingSave
	bytes int
	done  chan struct{} // closed once written or failed
	err   error         // set before done is closed
}

// saver buffers the connector's saves and writes them in batches.
type saver struct {
	mu       sync.Mutex
	open     *saveBatch   // filling up; nil when empty
	flushing []*saveBatch // being written, oldest first
	failed   []*saveBatch // failed, not yet reported by WaitForSave
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

// SaveLayer stores kv under the layer's key and refreshes the prefix's
// marker. It encodes (copies) kv at once, so the caller may reuse it, and
// buffers the value with the other saves since the last write; the buffer
// is written in the background once it holds flushBytes, or by
// WaitForSave, each prefix's layers and marker in one MULTI so that the
// marker never outlives a failed save of its layers. A failed write is
// reported by WaitForSave.
func (c *connector) SaveLayer(ctx context.Context, req *registry.Request, layer string, numTokens int, kv []byte) error {
	h, err := c.prefix(req, layer, numTokens)
	if err != nil {
		return err
	}
	err = ctx.Err()
	if c.closed.Load() {
		err = goredis.ErrClosed
	}
	if err != nil {
		return fmt.Errorf("%s: save layer %q of %d tokens of request %q: %w", c.where, layer, numTokens, req.ID, err)
	}
	value := encodeValue(c.saver.getBuffer(), h, layer, kv)
	s := &c.saver
	s.mu.Lock()
	if s.open == nil {
		s.open = &saveBatch{done: make(chan struct{})}
	}
	b := s.open
	b.saves = append(b.saves, pendingSave{prefix: h, layer: layer, value: value})
	b.bytes += len(value)
	if b.bytes < flushBytes {
		s.mu.Unlock()
		return nil
	}
	s.open = nil
	s.startLocked(b)
	var oldest *saveBatch
	if len(s.flushing) > maxWrites {
		oldest = s.flushing[0]
	}
	s.mu.Unlock()
	// The caller's context may end when SaveLayer returns; the client's
	// write and read timeouts bound the write instead.
	go c.write(context.WithoutCancel(ctx), b)
	if oldest != nil {
		select {
		case <-oldest.done:
		case <-ctx.Done():
			return fmt.Errorf("%s: save layer %q of %d tokens of request %q: waiting for earlier writes: %w", c.where, layer, numTokens, req.ID, ctx.Err())
		}
	}
	return nil
}

// WaitForSave writes what SaveLayer buffered and waits for the writes
// other calls started. It reports the failures of the writes it waited for
// and of any other write that failed since a WaitForSave last reported.
func (c *connector) WaitForSave(ctx context.Context) error {
	s := &c.saver
	s.mu.Lock()
	b := s.open
	s.open = nil
	if b != nil {
		s.startLocked(b)
	}
	others := slices.Clone(s.flushing)
	if b != nil {
		others = others[:len(others)-1] // b, written below
	}
	s.mu.Unlock()
	if b != nil {
		_ = c.write(ctx, b)
		others = append(others, b)
	}
	for _, o := range others {
		select {
		case <-o.done:
		case <-ctx.Done():
			return fmt.Errorf("%s: wait for saves: %w", c.where, ctx.Err())
		}
	}
	s.mu.Lock()
	for _, f := range s.failed {
		if !slices.Contains(others, f) {
			others = append(others, f)
		}
	}
	s.failed = nil
	s.mu.Unlock()
	var errs []error
	for _, o := range others {
		errs = append(errs, o.err)
	}
	return errors.Join(errs...)
}

func (s *saver) startLocked(b *saveBatch) { s.flushing = append(s.flushing, b) }

// write stores the batch: one MULTI per prefix, since a Redis Cluster runs
// a transaction in one slot only and a prefix's keys share one, all of them
// pipelined together on a single server and sent to their nodes at once
// on a cluster.
func (c *connector) write(ctx context.Context, b *saveBatch) error {
	ttl := time.Duration(c.opts.TTL)
	groups := map[registry.BlockHash][]pendingSave{}
	var order []registry.BlockHash
	for _, sv := range b.saves {
		if _, ok := groups[sv.prefix]; !ok {
			order = append(order, sv.prefix)
		}
		groups[sv.prefix] = append(groups[sv.prefix], sv)
	}
	errs := make([]error, len(order))
	writeGroup := func(i int, h registry.BlockHash) {
		_, err := c.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			for _, sv := range groups[h] {
				p.Set(ctx, c.layerKey(h, sv.layer), sv.value, ttl)
			}
			p.Set(ctx, c.prefixKey(h), "", ttl)
			return nil
		})
		if err != nil {
			c.failed(err)
			errs[i] = fmt.Errorf("%s: write %d layers of prefix %s: %w", c.where, len(groups[h]), h, err)
			return
		}
		c.reader.saved(h, groups[h])
	}
	var wg sync.WaitGroup
	for i, h := range order {
		if len(order) == 1 {
			writeGroup(i, h)
			break
		}
		wg.Go(func() { writeGroup(i, h) })
	}
	wg.Wait()
	// go-redis has written the values and keeps no reference to them.
	for _, sv := range b.saves {
		c.saver.putBuffer(sv.value)
	}
	b.saves = nil
	err := errors.Join(errs...)
	s := &c.saver
	s.mu.Lock()
	s.flushing = slices.DeleteFunc(s.flushing, func(o *saveBatch) bool { return o == b })
	b.err = err
	if err != nil && len(s.failed) < maxFailures {
		s.failed = append(s.failed, b)
	}
	s.mu.Unlock()
	close(b.done)
	return err
}
