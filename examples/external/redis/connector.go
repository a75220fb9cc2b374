package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvgen/kvgen/registry/kv"
)

// New connects to Redis with the settings in cfg.Extra (see [Options]) and
// returns a connector for role; both roles are served by the same type, so a
// process may call New once per role. It fails if the server does not answer
// a PING within the dial timeout, so a wrong address is reported at start-up
// rather than at the first request.
//
//kvgen:constructor
func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	if role != kv.RoleScheduler && role != kv.RoleWorker {
		return nil, fmt.Errorf("invalid role %v", role)
	}
	routeGoRedisLogs()
	prefixes, err := cfg.Prefixes()
	if err != nil {
		return nil, err
	}
	opts, err := decodeOptions(cfg.Extra)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := opts.TLS.config()
	if err != nil {
		return nil, err
	}
	c := &connector{
		opts:     opts,
		prefixes: prefixes,
		held:     prefixes.HeldBlocks(),
		writing:  map[kv.BlockHash]int{},
		raced:    map[kv.BlockHash]bool{},
		layers:   slices.Clone(cfg.LayerNames),
		layerSet: make(map[string]bool, len(cfg.LayerNames)),
		where:    where(opts),
		logger:   cfg.Logger(),
		client: goredis.NewUniversalClient(&goredis.UniversalOptions{
			Addrs:                 slices.Clone(opts.Addrs),
			IsClusterMode:         opts.isCluster(),
			MasterName:            opts.MasterName,
			DB:                    opts.DB,
			Username:              opts.Username,
			Password:              opts.Password,
			TLSConfig:             tlsConfig,
			PoolSize:              opts.PoolSize,
			DialTimeout:           time.Duration(opts.DialTimeout),
			ReadTimeout:           time.Duration(opts.ReadTimeout),
			WriteTimeout:          time.Duration(opts.WriteTimeout),
			ContextTimeoutEnabled: true,
			// A cache that cannot be reached must fail fast, so the engine
			// recomputes instead of waiting: one dial per attempt instead of
			// go-redis' five, while its command retries (3) still ride over
			// a dropped connection.
			DialerRetries: 1,
		}),
	}
	for _, l := range c.layers {
		c.layerSet[l] = true
	}
	c.startWriter()
	pingCtx, cancel := context.WithTimeout(ctx, time.Duration(opts.DialTimeout))
	defer cancel()
	if err := c.check(pingCtx); err != nil {
		c.stopWriter()
		_ = c.client.Close()
		return nil, fmt.Errorf("%s: %w", c.where, err)
	}
	return c, nil
}

// check asks the server for a PING and, for a single server, whether it is
// a Redis Cluster node after all: a plain client would then fail on the
// first save with MOVED or EXECABORT, far from the setting that is wrong.
func (c *connector) check(ctx context.Context) error {
	if err := c.client.Ping(ctx).Err(); err != nil {
		return err
	}
	if c.opts.isCluster() || c.opts.MasterName != "" {
		return nil
	}
	info, err := c.client.Info(ctx, "cluster").Result()
	if err != nil {
		return fmt.Errorf("INFO cluster: %w", err)
	}
	if strings.Contains(info, "cluster_enabled:1") {
		return errors.New(`the server is a Redis Cluster node: set "cluster": true in kv_connector_extra_config`)
	}
	return nil
}

// where names the server in errors: "redis at 127.0.0.1:6379".
func where(opts Options) string {
	s := "redis at " + strings.Join(opts.Addrs, ",")
	if opts.Cluster && len(opts.Addrs) == 1 {
		s += " (cluster)"
	}
	if opts.MasterName != "" {
		s += fmt.Sprintf(" (sentinel master %s)", kv.Quote(opts.MasterName))
	}
	return s
}

// connector implements both [kv.Scheduler] and [kv.Worker]. It
// keeps no state besides the client, whose pool redials by itself when the
// server comes back, so nothing has to be reset after an outage.
type connector struct {
	opts     Options
	prefixes kv.Prefixes // keys of this model's prompts
	layers   []string
	where    string
	client   goredis.UniversalClient
	logger   *slog.Logger // the host's, from cfg.Logger()
	layerSet map[string]bool
	saver    saver
	reader   reader

	closeOnce sync.Once
	closed    atomic.Bool // SaveLayer buffers, so it checks this itself

	stats kv.StatsRecorder
	emit  kv.EventFunc
	held  *kv.HeldBlocks // the blocks reported stored
	// eventsMu orders what changes held: a save completing a prefix, and
	// a check that one is gone.
	eventsMu sync.Mutex
	// A removal can be notified between a save's transaction and its
	// report that the prefix is held, while held does not yet hold it:
	// writing counts the transactions in flight by prefix, and raced
	// keeps those a removal was notified for meanwhile, which the save
	// checks once it has reported them (see doneWriting).
	racedMu   sync.Mutex
	writing   map[kv.BlockHash]int
	raced     map[kv.BlockHash]bool
	watchMu   sync.Mutex // guards watch
	watch     *watcher   // following keyspace notifications; nil when not
	storeOnly atomic.Pointer[error]
}

var (
	_ kv.Scheduler       = (*connector)(nil)
	_ kv.Worker          = (*connector)(nil)
	_ kv.StatsReporter   = (*connector)(nil)
	_ kv.EventReporter   = (*connector)(nil)
	_ kv.RemovalReporter = (*connector)(nil)
)

// KVStats returns what the connector counted since KVStats was first
// called. A save is timed from SaveLayer until its batch is written, and
// counts as failed when the batch fails; a stored value that fails its
// check counts as a miss and as ErrorCorrupt.
func (c *connector) KVStats() kv.Stats { return c.stats.Stats() }

// ReportEvents reports, on medium REDIS, a BlockStored event naming the
// blocks a prefix adds to those this connector reported stored, when a
// write of this connector stored the prefix's last missing layer; and a
// BlockRemoved event naming every block no longer held when a prefix it
// reported stored stops being loadable (a key of it expired, evicted or
// deleted, as keyspace notifications tell, and not saved again since).
// It reports AllBlocksCleared when it may have missed a removal: after a
// subscription to a server's notifications was lost and made again, when
// more removals wait than it queues, or when it cannot check one. Having
// reported maxHeldBlocks blocks, it also reports AllBlocksCleared and
// starts over, which bounds what it remembers.
//
// The first call with a function subscribes to every primary's
// notifications (keyspace_events), and returns once each answered or
// failed; ReportEvents(nil) unsubscribes.
func (c *connector) ReportEvents(emit func(kv.KVEvent)) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if emit == nil {
		c.emit.Set(nil)
		c.stopWatch()
		return
	}
	c.emit.Set(emit)
	if c.watch == nil && c.opts.KeyspaceEvents != keyspaceOff && !c.closed.Load() {
		c.startWatch()
	}
}

// maxHeldBlocks bounds the blocks the connector remembers reporting
// stored, about 100 bytes each.
const maxHeldBlocks = 1 << 18

// ReportsRemovals returns nil while the connector follows keyspace
// notifications, and says why not otherwise: keyspace_events is "off", or
// a server lacks the notifications it needs and refused to turn them on.
func (c *connector) ReportsRemovals() error {
	if c.opts.KeyspaceEvents == keyspaceOff {
		return errNotifyOff
	}
	if err := c.storeOnly.Load(); err != nil {
		return *err
	}
	return nil
}

// Close writes the saves still buffered, then closes the client's
// connections. Later calls return nil, as the contract asks, and later
// requests fail with go-redis' "client is closed".
func (c *connector) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.watchMu.Lock()
		c.stopWatch()
		c.watchMu.Unlock()
		// The client's read and write timeouts bound the last writes.
		err = c.WaitForSave(context.Background())
		c.stopWriter()
		if cerr := c.client.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("%s: close: %w", c.where, cerr))
		}
		c.reader.mu.Lock()
		c.reader.ahead = nil
		c.reader.mu.Unlock()
	})
	return err
}

// MatchedTokens returns how many tokens beyond numComputed the longest
// complete stored prefix adds. A prefix is complete when every layer of
// cfg.LayerNames is stored for it, or, without layer names, when any layer
// is. All candidate prefixes are checked in one pipelined round trip.
func (c *connector) MatchedTokens(ctx context.Context, req *kv.Request, numComputed int) (int, error) {
	if numComputed < 0 {
		return 0, fmt.Errorf("request %s: %d computed tokens: want 0 or more", kv.Quote(req.ID), numComputed)
	}
	hashes := c.prefixes.Hashes(req.PromptTokens)
	first := numComputed / c.prefixes.BlockSize() // the first block not wholly computed
	if first >= len(hashes) {
		return 0, nil
	}
	candidates := hashes[first:]
	complete, err := c.complete(ctx, candidates)
	if err != nil {
		c.failed(err)
		return 0, fmt.Errorf("%s: look up %d prefixes of request %s: %w", c.where, len(candidates), kv.Quote(req.ID), err)
	}
	for i := len(complete) - 1; i >= 0; i-- {
		if complete[i] {
			return (first+i+1)*c.prefixes.BlockSize() - numComputed, nil
		}
	}
	return 0, nil
}

// complete reports, for each prefix hash, whether the prefix is complete
// (every key of keysOf exists), asking in one pipelined round trip.
func (c *connector) complete(ctx context.Context, hashes []kv.BlockHash) ([]bool, error) {
	cmds := make([]*goredis.IntCmd, len(hashes))
	_, err := c.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, h := range hashes {
			cmds[i] = p.Exists(ctx, c.keysOf(h)...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	want := int64(max(len(c.layers), 1))
	out := make([]bool, len(hashes))
	for i, cmd := range cmds {
		out[i] = cmd.Val() == want
	}
	return out, nil
}

// keysOf returns the keys whose existence makes the prefix with hash h
// complete.
func (c *connector) keysOf(h kv.BlockHash) []string {
	if len(c.layers) == 0 {
		return []string{c.prefixKey(h)}
	}
	keys := make([]string, len(c.layers))
	for i, l := range c.layers {
		keys[i] = c.layerKey(h, l)
	}
	return keys
}

// AfterAlloc does nothing: loads are driven by the worker, and the
// scheduler side keeps no per-request state.
func (c *connector) AfterAlloc(context.Context, *kv.Request, int) error { return nil }

// RequestFinished does nothing, for the reason AfterAlloc does nothing.
func (c *connector) RequestFinished(context.Context, *kv.Request) error { return nil }

// prefix checks a save or load and returns the hash of its prefix.
func (c *connector) prefix(req *kv.Request, layer string, numTokens int) (kv.BlockHash, error) {
	if layer == "" {
		return kv.BlockHash{}, fmt.Errorf("request %s: empty layer name", kv.Quote(req.ID))
	}
	h, err := c.prefixes.Hash(req.PromptTokens, numTokens)
	if err != nil {
		return kv.BlockHash{}, fmt.Errorf("request %s, layer %s: %w", kv.Quote(req.ID), kv.Quote(layer), err)
	}
	return h, nil
}

// Finished reports every finished request as both sent and received,
// because loads complete within LoadLayer and saves by WaitForSave, and
// drops what was read ahead for them.
func (c *connector) Finished(_ context.Context, finished []string) (sent, received []string, err error) {
	c.reader.forget(finished)
	return slices.Clone(finished), slices.Clone(finished), nil
}

// failed notes that a call to Redis failed. On a cluster it has go-redis
// reload the slot map, which it does by itself only on MOVED or once a
// minute: after a master dies, its slots would go on being sent to it for
// up to a minute after its replica took over.
func (c *connector) failed(err error) {
	if cc, ok := c.client.(*goredis.ClusterClient); ok && err != nil && !errors.Is(err, goredis.Nil) && !isWrongType(err) {
		cc.ReloadState(context.Background()) // asynchronous, and coalesced
	}
}
