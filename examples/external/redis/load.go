package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvgen/kvgen/registry/kv"
)

// readAheadTTL is how long layers read ahead for a request are kept when
// the request neither loads them nor finishes.
const readAheadTTL = 30 * time.Second

// aheadKey names the layers read ahead for one request's prefix.
type aheadKey struct {
	request string
	prefix  kv.BlockHash
}

// readAhead is what one round trip fetched: every configured layer of a
// prefix, each handed out once.
type readAhead struct {
	born  time.Time
	done  chan struct{}    // closed once vals is filled
	vals  map[string]reply // by layer; a layer leaves when it is loaded
	stale map[string]bool  // layers saved again while the fetch ran
}

// reply is Redis' answer for one key.
type reply struct {
	value []byte
	err   error // goredis.Nil for a missing key
}

// reader holds the layers read ahead.
type reader struct {
	mu    sync.Mutex
	ahead map[aheadKey]*readAhead
}

// LoadLayer returns the layer's KV as it was saved. A missing key is a miss;
// so is a value that fails its checksum, was saved for another key, or is
// not a string, which is also logged as a warning because it means
// something else wrote to the connector's keys. A failure to reach Redis is
// an error, not a miss.
//
// Engines load every layer of a prefix one after the other, so the first
// load of a layer named in the config's layer names fetches all of them in
// one round trip and keeps the others until they are loaded, the request is
// reported by Finished, or readAheadTTL passes. Each value is checked when
// it is handed out, as a value fetched alone is.
func (c *connector) LoadLayer(ctx context.Context, req *kv.Request, layer string, numTokens int) ([]byte, error) {
	start := c.stats.Start()
	kvData, err := c.loadLayer(ctx, req, layer, numTokens)
	c.stats.LoadDone(start, len(kvData), err)
	return kvData, err
}

// loadLayer is LoadLayer without the counting.
func (c *connector) loadLayer(ctx context.Context, req *kv.Request, layer string, numTokens int) ([]byte, error) {
	h, err := c.prefix(req, layer, numTokens)
	if err != nil {
		return nil, err
	}
	r, ok := c.takeAhead(ctx, aheadKey{req.ID, h}, layer, numTokens)
	if !ok || (r.err != nil && !errors.Is(r.err, goredis.Nil)) {
		// Not read ahead, or the read ahead failed, perhaps with another
		// call's context: this call asks on its own.
		r = bounded(c.client.GetRange(ctx, c.layerKey(h, layer), 0, c.valueLimit(layer, numTokens)))
	}
	if errors.Is(r.err, goredis.Nil) {
		// No key, or an empty value, which no save of this connector
		// writes: a miss after MatchedTokens found the prefix is rare
		// enough to ask which, in one transaction, since a save may write
		// the key meanwhile.
		key := c.layerKey(h, layer)
		var exists *goredis.IntCmd
		var again *goredis.StringCmd
		if _, err := c.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			exists = p.Exists(ctx, key)
			again = p.GetRange(ctx, key, 0, c.valueLimit(layer, numTokens))
			return nil
		}); err == nil && exists.Val() == 1 {
			r = reply{value: []byte(again.Val())}
		}
	}
	return c.decodeReply(ctx, req, h, layer, numTokens, r)
}

// valueLimit is the most a stored value of layer for numTokens tokens may
// hold: its header and the KV the settings allow.
func (c *connector) valueLimit(layer string, numTokens int) int64 {
	kvBytes := c.opts.MaxLayerBytes
	if numTokens < 0 {
		kvBytes = 0
	} else if int64(numTokens) <= kvBytes/c.opts.MaxBytesPerToken {
		kvBytes = int64(numTokens) * c.opts.MaxBytesPerToken
	}
	return int64(fixedHeaderLen+len(layer)) + kvBytes
}

// bounded is the reply of a GETRANGE of a value's first limit+1 bytes,
// which reads no more of a value than a layer may hold, whatever another
// client stored there: no key and an empty value both read as "", which
// is a miss (every value this connector writes has a header).
func bounded(cmd *goredis.StringCmd) reply {
	v, err := cmd.Bytes()
	if err == nil && len(v) == 0 {
		err = goredis.Nil
	}
	return reply{v, err}
}

// takeAhead returns the layer's reply from the read ahead for k, fetching
// it first if this is the first load of a configured layer for k.
func (c *connector) takeAhead(ctx context.Context, k aheadKey, layer string, numTokens int) (reply, bool) {
	if len(c.layers) < 2 || !c.layerSet[layer] {
		return reply{}, false
	}
	rd := &c.reader
	rd.mu.Lock()
	// Every load drops what was read ahead too long ago, for requests
	// that were never reported finished.
	now := time.Now()
	for ok, o := range rd.ahead {
		if now.Sub(o.born) > readAheadTTL {
			delete(rd.ahead, ok)
		}
	}
	ra := rd.ahead[k]
	fetch := ra == nil
	if fetch {
		ra = &readAhead{born: now, done: make(chan struct{})}
		if rd.ahead == nil {
			rd.ahead = make(map[aheadKey]*readAhead)
		}
		rd.ahead[k] = ra
	}
	rd.mu.Unlock()
	if fetch {
		c.fetch(ctx, k, ra, numTokens)
	} else {
		select {
		case <-ra.done:
		case <-ctx.Done():
			return reply{}, false
		}
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	r, ok := ra.vals[layer]
	if ok {
		delete(ra.vals, layer)
	}
	if ra.stale[layer] {
		ok = false
	}
	if len(ra.vals) == 0 && rd.ahead[k] == ra {
		delete(rd.ahead, k)
	}
	return r, ok
}

// fetch reads every configured layer of k's prefix in one pipeline (the
// keys share a slot, so one node answers on a cluster too).
func (c *connector) fetch(ctx context.Context, k aheadKey, ra *readAhead, numTokens int) {
	cmds := make([]*goredis.StringCmd, len(c.layers))
	_, _ = c.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, l := range c.layers {
			cmds[i] = p.GetRange(ctx, c.layerKey(k.prefix, l), 0, c.valueLimit(l, numTokens))
		}
		return nil
	})
	vals := make(map[string]reply, len(c.layers))
	failed := false
	for i, l := range c.layers {
		r := bounded(cmds[i])
		vals[l] = r
		failed = failed || (r.err != nil && !errors.Is(r.err, goredis.Nil) && !isWrongType(r.err))
	}
	rd := &c.reader
	rd.mu.Lock()
	ra.vals = vals
	if failed && rd.ahead[k] == ra {
		// Errors are not kept: the next load asks again.
		delete(rd.ahead, k)
	}
	rd.mu.Unlock()
	close(ra.done)
}

// saved drops what was read ahead for layers that have just been saved
// again, so a load after a save never returns the older value.
func (rd *reader) saved(h kv.BlockHash, saves []pendingSave) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	for k, ra := range rd.ahead {
		if k.prefix != h {
			continue
		}
		for _, sv := range saves {
			if ra.stale == nil {
				ra.stale = make(map[string]bool)
			}
			ra.stale[sv.layer] = true
		}
	}
}

// forget drops what was read ahead for the given requests.
func (rd *reader) forget(requests []string) {
	ids := make(map[string]bool, len(requests))
	for _, id := range requests {
		ids[id] = true
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	for k := range rd.ahead {
		if ids[k.request] {
			delete(rd.ahead, k)
		}
	}
}

// decodeReply turns Redis' answer for a layer's key into its KV, a miss or
// an error.
func (c *connector) decodeReply(ctx context.Context, req *kv.Request, h kv.BlockHash, layer string, numTokens int, r reply) ([]byte, error) {
	key := c.layerKey(h, layer)
	if errors.Is(r.err, goredis.Nil) {
		return nil, fmt.Errorf("%w: layer %s of %d tokens of request %s", kv.ErrMiss, kv.Quote(layer), numTokens, kv.Quote(req.ID))
	}
	var kvData []byte
	err := r.err
	if isWrongType(err) {
		err = fmt.Errorf("%w: the key holds another type", errForeign)
	} else if err != nil {
		c.failed(err)
		return nil, fmt.Errorf("%s: load layer %s of %d tokens of request %s: %w", c.where, kv.Quote(layer), numTokens, kv.Quote(req.ID), err)
	} else if limit := c.valueLimit(layer, numTokens); int64(len(r.value)) > limit {
		err = fmt.Errorf("%w: more than the %d bytes a value of a layer of %d tokens may hold (max_layer_bytes %d, max_bytes_per_token %d); read no further",
			errForeign, limit, numTokens, c.opts.MaxLayerBytes, c.opts.MaxBytesPerToken)
	} else {
		kvData, err = decodeValue(r.value, h, layer)
	}
	if err != nil {
		c.logger.WarnContext(ctx, "redis kv connector: ignoring a stored value that fails its check",
			slog.String("key", key), slog.String("request", req.ID), slog.String("reason", err.Error()))
		// The value holds the whole layer: every block of the prefix fails.
		bs := c.prefixes.BlockSize()
		return nil, &kv.LoadError{Layer: layer, EndBlock: numTokens / bs, BlockSize: bs,
			Err: fmt.Errorf("request %s: stored value rejected: %w", kv.Quote(req.ID), err)}
	}
	return kvData, nil
}

// isWrongType reports whether err is Redis' answer to GETRANGE on a key that
// holds a list, hash or another non-string type.
func isWrongType(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE")
}
