package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvgen/kvgen/registry"
)

// New connects to Redis with the settings in cfg.Extra (see [Options]) and
// returns a connector for role; both roles are served by the same type, so a
// process may call New once per role. It fails if the server does not answer
// a PING within the dial timeout, so a wrong address is reported at start-up
// rather than at the first request.
//
//kvgen:constructor
func New(ctx context.Context, cfg registry.Config, role registry.Role) (registry.Connector, error) {
	if role != registry.RoleScheduler && role != registry.RoleWorker {
		return nil, fmt.Errorf("invalid role %v", role)
	}
	prefixes, err := cfg.Prefixes()
	if err != nil {
		return nil, err
	}
	opts, err := decodeOptions(cfg.Extra)
	if err != nil {
		return nil, err
	}
	c := &connector{
		opts:     opts,
		prefixes: prefixes,
		layers:   slices.Clone(cfg.LayerNames),
		where:    where(opts),
		client: goredis.NewUniversalClient(&goredis.UniversalOptions{
			Addrs:                 slices.Clone(opts.Addrs),
			MasterName:            opts.MasterName,
			DB:                    opts.DB,
			Username:              opts.Username,
			Password:              opts.Password,
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
	pingCtx, cancel := context.WithTimeout(ctx, time.Duration(opts.DialTimeout))
	defer cancel()
	if err := c.client.Ping(pingCtx).Err(); err != nil {
		_ = c.client.Close()
		return nil, fmt.Errorf("%s: %w", c.where, err)
	}
	return c, nil
}

// where names the server in errors: "redis at 127.0.0.1:6379".
func where(opts Options) string {
	s := "redis at " + strings.Join(opts.Addrs, ",")
	if opts.MasterName != "" {
		s += fmt.Sprintf(" (sentinel master %q)", opts.MasterName)
	}
	return s
}

// connector implements both [registry.Scheduler] and [registry.Worker]. It
// keeps no state besides the client, whose pool redials by itself when the
// server comes back, so nothing has to be reset after an outage.
type connector struct {
	opts     Options
	prefixes registry.Prefixes // keys of this model's prompts
	layers   []string
	where    string
	client   goredis.UniversalClient
	logger   *slog.Logger // nil means slog.Default()

	closeOnce sync.Once
}

var (
	_ registry.Scheduler = (*connector)(nil)
	_ registry.Worker    = (*connector)(nil)
)

// Close closes the client's connections. Later calls return nil, as the
// contract asks, and later requests fail with go-redis' "client is closed".
func (c *connector) Close() error {
	var err error
	c.closeOnce.Do(func() {
		if cerr := c.client.Close(); cerr != nil {
			err = fmt.Errorf("%s: close: %w", c.where, cerr)
		}
	})
	return err
}

// MatchedTokens returns how many tokens beyond numComputed the longest
// complete stored prefix adds. A prefix is complete when every layer of
// cfg.LayerNames is stored for it, or, without layer names, when any layer
// is. All candidate prefixes are checked in one pipelined round trip.
func (c *connector) MatchedTokens(ctx context.Context, req *registry.Request, numComputed int) (int, error) {
	if numComputed < 0 {
		return 0, fmt.Errorf("request %q: %d computed tokens: want 0 or more", req.ID, numComputed)
	}
	hashes := c.prefixes.Hashes(req.PromptTokens)
	first := numComputed / c.prefixes.BlockSize() // the first block not wholly computed
	if first >= len(hashes) {
		return 0, nil
	}
	candidates := hashes[first:]
	want := int64(max(len(c.layers), 1))
	cmds := make([]*goredis.IntCmd, len(candidates))
	_, err := c.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, h := range candidates {
			cmds[i] = p.Exists(ctx, c.keysOf(h)...)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s: look up %d prefixes of request %q: %w", c.where, len(candidates), req.ID, err)
	}
	for i := len(cmds) - 1; i >= 0; i-- {
		if cmds[i].Val() == want {
			return (first+i+1)*c.prefixes.BlockSize() - numComputed, nil
		}
	}
	return 0, nil
}

// keysOf returns the keys whose existence makes the prefix with hash h
// complete.
func (c *connector) keysOf(h registry.BlockHash) []string {
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
func (c *connector) AfterAlloc(context.Context, *registry.Request, int) error { return nil }

// RequestFinished does nothing, for the reason AfterAlloc does nothing.
func (c *connector) RequestFinished(context.Context, *registry.Request) error { return nil }

// SaveLayer stores kv under the layer's key, refreshing the prefix's marker,
// in one MULTI so that the marker never outlives a failed save of the
// layer. The save is complete when SaveLayer returns.
func (c *connector) SaveLayer(ctx context.Context, req *registry.Request, layer string, numTokens int, kv []byte) error {
	h, err := c.prefix(req, layer, numTokens)
	if err != nil {
		return err
	}
	value := encodeValue(h, layer, kv)
	ttl := time.Duration(c.opts.TTL)
	_, err = c.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, c.layerKey(h, layer), value, ttl)
		p.Set(ctx, c.prefixKey(h), "", ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: save layer %q of %d tokens of request %q: %w", c.where, layer, numTokens, req.ID, err)
	}
	return nil
}

// LoadLayer returns the layer's KV as it was saved. A missing key is a miss;
// so is a value that fails its checksum or was saved for another key, which
// is also logged as a warning because it means something wrote to the
// connector's keys. A failure to reach Redis is an error, not a miss.
func (c *connector) LoadLayer(ctx context.Context, req *registry.Request, layer string, numTokens int) ([]byte, error) {
	h, err := c.prefix(req, layer, numTokens)
	if err != nil {
		return nil, err
	}
	key := c.layerKey(h, layer)
	v, err := c.client.Get(ctx, key).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("%w: layer %q of %d tokens of request %q", registry.ErrMiss, layer, numTokens, req.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: load layer %q of %d tokens of request %q: %w", c.where, layer, numTokens, req.ID, err)
	}
	kv, err := decodeValue(v, h, layer)
	if err != nil {
		c.log().WarnContext(ctx, "redis kv connector: ignoring a stored value that fails its check",
			slog.String("key", key), slog.String("request", req.ID), slog.String("reason", err.Error()))
		return nil, fmt.Errorf("%w: layer %q of %d tokens of request %q: stored value rejected: %w",
			registry.ErrMiss, layer, numTokens, req.ID, err)
	}
	return kv, nil
}

// prefix checks a save or load and returns the hash of its prefix.
func (c *connector) prefix(req *registry.Request, layer string, numTokens int) (registry.BlockHash, error) {
	if layer == "" {
		return registry.BlockHash{}, fmt.Errorf("request %q: empty layer name", req.ID)
	}
	h, err := c.prefixes.Hash(req.PromptTokens, numTokens)
	if err != nil {
		return registry.BlockHash{}, fmt.Errorf("request %q, layer %q: %w", req.ID, layer, err)
	}
	return h, nil
}

// WaitForSave returns at once: SaveLayer returns only once Redis stored
// the layer.
func (c *connector) WaitForSave(context.Context) error { return nil }

// Finished reports every finished request as both sent and received,
// because transfers complete within SaveLayer and LoadLayer.
func (c *connector) Finished(_ context.Context, finished []string) (sent, received []string, err error) {
	return slices.Clone(finished), slices.Clone(finished), nil
}

func (c *connector) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	return slog.Default()
}
