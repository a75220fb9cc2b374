package redis

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvgen/kvgen/registry/kv"
)

// The values of the keyspace_events setting.
const (
	// keyspaceAuto follows keyspace notifications, turning on the
	// classes they need with CONFIG SET where the server lacks them.
	keyspaceAuto = "auto"
	// keyspaceAssume follows them without CONFIG: the operator has set
	// notify-keyspace-events (a managed service that refuses CONFIG).
	keyspaceAssume = "assume"
	// keyspaceOff follows none: events are store-only.
	keyspaceOff = "off"
)

// removalEvents are the keyevent notifications of a key going away: by
// its TTL (x), by maxmemory (e), and by DEL, UNLINK, RENAME and MOVE (g).
var removalEvents = []string{"expired", "evicted", "del", "rename_from", "move_from"}

// neededClasses are the notify-keyspace-events classes removalEvents need.
const neededClasses = "Egxe"

// Bounds on what the notifications make the connector hold or do.
const (
	// maxPending bounds the prefixes waiting to be checked. Only prefixes
	// reported stored are queued, each once; past the bound the
	// connector reports AllBlocksCleared rather than drop one unseen.
	maxPending = 1 << 16
	// maxCheck bounds the prefixes checked in one round trip.
	maxCheck = 1024
	// healthEvery is how long a silent subscription waits before it
	// pings the server, and then how long it waits for the answer.
	healthEvery = 15 * time.Second
	// topologyEvery is how often the masters of a cluster are listed.
	topologyEvery = time.Second
	// maxBackoff bounds the wait between attempts to subscribe again.
	maxBackoff = 2 * time.Second
)

// watcher follows the keyspace notifications of every primary while
// events are asked for, and reports the prefixes they make unloadable.
type watcher struct {
	c      *connector
	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	nodes    map[string]*nodeWatch // by address
	pending  map[kv.BlockHash]struct{}
	overflow bool
	wake     chan struct{}
}

// nodeWatch is the subscription to one primary.
type nodeWatch struct {
	client *goredis.Client
	stop   chan struct{}
	ps     *goredis.PubSub // the current subscription, nil between them
}

// errNotifyOff is why events are store-only with keyspace_events "off".
var errNotifyOff = errors.New(`redis connector: store-only events: keyspace_events is "off", and Redis expires (ttl) and evicts (maxmemory) keys, and other clients delete them, without telling this client`)

// startWatch starts following the primaries and returns once each known
// one is subscribed to or has failed its first attempt.
func (c *connector) startWatch() {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{c: c, ctx: ctx, cancel: cancel, nodes: map[string]*nodeWatch{},
		pending: map[kv.BlockHash]struct{}{}, wake: make(chan struct{}, 1)}
	c.watch = w
	c.storeOnly.Store(nil)
	// What was reported stored before went unwatched since.
	if c.held.Blocks() > 0 {
		c.clearHeld()
	}
	w.wg.Go(w.check)
	var first sync.WaitGroup
	if cc, ok := c.client.(*goredis.ClusterClient); ok {
		w.addMasters(cc, &first)
		w.wg.Go(func() { w.followTopology(cc) })
	} else if node, ok := c.client.(*goredis.Client); ok {
		// A single server, or the master a Sentinel names: go-redis
		// dials whichever is master now.
		w.add(node, &first)
	}
	first.Wait()
}

// stopWatch stops following and waits until no notification is handled.
func (c *connector) stopWatch() {
	w := c.watch
	if w == nil {
		return
	}
	c.watch = nil
	w.cancel()
	w.mu.Lock()
	for addr, n := range w.nodes {
		w.dropLocked(addr, n)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// clearHeld forgets every prefix reported stored and reports
// AllBlocksCleared.
func (c *connector) clearHeld() {
	c.eventsMu.Lock()
	defer c.eventsMu.Unlock()
	c.held.Cleared(c.emit.Get())
}

// addMasters follows each master of the cluster not yet followed; a
// master added after the first listing reports AllBlocksCleared once
// subscribed, since what it removed before went unseen.
func (w *watcher) addMasters(cc *goredis.ClusterClient, first *sync.WaitGroup) {
	ctx, cancel := context.WithTimeout(w.ctx, w.c.setupTimeout())
	defer cancel()
	var mu sync.Mutex
	masters := map[string]*goredis.Client{}
	err := cc.ForEachMaster(ctx, func(_ context.Context, node *goredis.Client) error {
		mu.Lock()
		masters[node.Options().Addr] = node
		mu.Unlock()
		return nil
	})
	if err != nil {
		return // the next listing tries again
	}
	w.mu.Lock()
	for addr, n := range w.nodes {
		if masters[addr] == nil {
			w.dropLocked(addr, n) // no longer a master
		}
	}
	w.mu.Unlock()
	for _, node := range masters {
		w.add(node, first)
	}
}

// followTopology lists the cluster's masters every topologyEvery.
func (w *watcher) followTopology(cc *goredis.ClusterClient) {
	t := time.NewTicker(topologyEvery)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		w.addMasters(cc, nil)
	}
}

// add follows node unless it is followed already. With first set, the
// first subscription is waited for, and reports AllBlocksCleared only if
// a prefix was reported stored before it began; otherwise every
// subscription reports AllBlocksCleared.
func (w *watcher) add(node *goredis.Client, first *sync.WaitGroup) {
	addr := node.Options().Addr
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nodes[addr] != nil || w.ctx.Err() != nil {
		return
	}
	n := &nodeWatch{client: node, stop: make(chan struct{})}
	w.nodes[addr] = n
	var done func()
	if first != nil {
		first.Add(1)
		done = first.Done
	}
	w.wg.Go(func() { w.follow(n, done) })
}

// dropLocked stops following the node at addr.
func (w *watcher) dropLocked(addr string, n *nodeWatch) {
	delete(w.nodes, addr)
	close(n.stop)
	if n.ps != nil {
		_ = n.ps.Close()
	}
}

// stopped reports whether n is no longer followed.
func (n *nodeWatch) stopped() bool {
	select {
	case <-n.stop:
		return true
	default:
		return false
	}
}

// follow subscribes to n's notifications and handles them, subscribing
// again after any failure, until n is dropped. Each subscription after
// the first reports AllBlocksCleared: notifications were lost meanwhile;
// so does the first, if a prefix was reported stored before it began.
func (w *watcher) follow(n *nodeWatch, firstDone func()) {
	c := w.c
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		ps, err := w.subscribe(n)
		var storeOnly *storeOnlyError
		if errors.As(err, &storeOnly) {
			// The server will not tell: the connector reports stores
			// only, and an index may hold what went unseen. It says so
			// before startWatch returns, so that ReportsRemovals right
			// after ReportEvents answers for this server.
			c.storeOnly.Store(&err)
			c.logger.Warn("redis kv connector: removals are not reported", slog.String("reason", err.Error()))
			if c.held.Blocks() > 0 {
				c.clearHeld()
			}
			if firstDone != nil {
				firstDone()
			}
			return
		}
		// A prefix held now was stored before the subscription could see
		// its removal: events were asked for before it began
		// (ReportEvents), or it was lost and made again. It is cleared
		// before ReportEvents returns, so that what is stored after is not.
		if err == nil && (attempt > 0 || firstDone == nil || c.held.Blocks() > 0) {
			c.clearHeld()
		}
		if firstDone != nil {
			firstDone()
		}
		if err == nil {
			backoff = 50 * time.Millisecond
			err = w.receive(n, ps)
			_ = ps.Close()
		}
		firstDone = nil
		if n.stopped() {
			return
		}
		c.failed(err)
		select {
		case <-n.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// storeOnlyError says why a server's notifications cannot be followed.
type storeOnlyError struct{ reason string }

func (e *storeOnlyError) Error() string {
	return "redis connector: store-only events: " + e.reason
}

// setupTimeout bounds setting up one subscription.
func (c *connector) setupTimeout() time.Duration {
	return time.Duration(c.opts.DialTimeout + c.opts.ReadTimeout + c.opts.WriteTimeout)
}

// subscribe turns on the notifications n's server needs (keyspace_events
// "auto") and subscribes to them, returning once the server confirmed
// every channel.
func (w *watcher) subscribe(n *nodeWatch) (*goredis.PubSub, error) {
	c := w.c
	ctx, cancel := context.WithTimeout(w.ctx, c.setupTimeout())
	defer cancel()
	if c.opts.KeyspaceEvents == keyspaceAuto {
		if err := enableClasses(ctx, n.client); err != nil {
			return nil, err
		}
	}
	channels := make([]string, len(removalEvents))
	for i, e := range removalEvents {
		channels[i] = fmt.Sprintf("__keyevent@%d__:%s", n.client.Options().DB, e)
	}
	ps := n.client.Subscribe(ctx, channels...)
	w.mu.Lock()
	if n.stopped() {
		w.mu.Unlock()
		_ = ps.Close()
		return nil, goredis.ErrClosed
	}
	n.ps = ps
	w.mu.Unlock()
	for confirmed := 0; confirmed < len(channels); {
		msg, err := ps.Receive(ctx)
		if err != nil {
			_ = ps.Close()
			return nil, err
		}
		switch m := msg.(type) {
		case *goredis.Subscription:
			if m.Kind == "subscribe" {
				confirmed++
			}
		case *goredis.Message:
			w.removed(m.Payload)
		}
	}
	return ps, nil
}

// enableClasses makes sure the server notifies what removalEvents need,
// adding the classes it lacks to those it has.
func enableClasses(ctx context.Context, node *goredis.Client) error {
	vals, err := node.ConfigGet(ctx, "notify-keyspace-events").Result()
	var re goredis.Error
	if errors.As(err, &re) {
		return &storeOnlyError{fmt.Sprintf(`CONFIG GET notify-keyspace-events was refused (%v); set notify-keyspace-events to include %q on the server and keyspace_events to "assume"`, kv.Quote(re.Error()), neededClasses)}
	}
	if err != nil {
		return err
	}
	have := vals["notify-keyspace-events"]
	missing := missingClasses(have)
	if missing == "" {
		return nil
	}
	err = node.ConfigSet(ctx, "notify-keyspace-events", have+missing).Err()
	if errors.As(err, &re) {
		return &storeOnlyError{fmt.Sprintf("notify-keyspace-events is %q, without %q, and CONFIG SET was refused (%v)", have, missing, kv.Quote(re.Error()))}
	}
	return err
}

// missingClasses returns the classes of neededClasses that the
// notify-keyspace-events value have lacks. "A" stands for every class
// of a key's events, g, x and e among them, but not for E.
func missingClasses(have string) string {
	var out strings.Builder
	for _, class := range neededClasses {
		if strings.ContainsRune(have, class) || (class != 'E' && strings.ContainsRune(have, 'A')) {
			continue
		}
		out.WriteRune(class)
	}
	return out.String()
}

// receive handles n's notifications until the subscription fails or n is
// dropped. A subscription silent for healthEvery is pinged; one that does
// not answer within another healthEvery has failed.
func (w *watcher) receive(n *nodeWatch, ps *goredis.PubSub) error {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(w.ctx, healthEvery)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !pinged && !n.stopped() {
			pinged = true
			if err := ps.Ping(w.ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		pinged = false
		if m, ok := msg.(*goredis.Message); ok {
			w.removed(m.Payload)
		}
	}
}

// hashHex is the length of a prefix hash in a key.
const hashHex = 2 * len(kv.BlockHash{})

// prefixOf returns the hash of the prefix whose key, marker or layer,
// key is: <key_prefix>{<64 hex digits>} or that followed by ":" and
// anything. A key of any other form is not the connector's.
func (c *connector) prefixOf(key string) (kv.BlockHash, bool) {
	var h kv.BlockHash
	rest, ok := strings.CutPrefix(key, c.opts.KeyPrefix+"{")
	if !ok || len(rest) < hashHex+1 || rest[hashHex] != '}' || (len(rest) > hashHex+1 && rest[hashHex+1] != ':') {
		return h, false
	}
	if n, err := hex.Decode(h[:], []byte(rest[:hashHex])); err != nil || n != len(h) {
		return h, false
	}
	return h, true
}

// removed queues the prefix of a key that went away for a check, if it
// is one reported stored.
func (w *watcher) removed(key string) {
	c := w.c
	h, ok := c.prefixOf(key)
	if !ok {
		return
	}
	// Under racedMu, so that a save of h ends either before (h is held)
	// or after (it sees raced) this notification is looked at.
	c.racedMu.Lock()
	held := c.held.Holds(h)
	if !held && c.writing[h] > 0 {
		c.raced[h] = true
	}
	c.racedMu.Unlock()
	if !held {
		return
	}
	w.mu.Lock()
	if _, queued := w.pending[h]; !queued {
		if len(w.pending) < maxPending {
			w.pending[h] = struct{}{}
		} else {
			w.overflow = true
		}
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// check reports the queued prefixes that are no longer loadable, until
// the watcher stops.
func (w *watcher) check() {
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		}
		for w.ctx.Err() == nil {
			w.mu.Lock()
			overflow := w.overflow
			w.overflow = false
			batch := make([]kv.BlockHash, 0, min(len(w.pending), maxCheck))
			for h := range w.pending {
				if len(batch) == maxCheck {
					break
				}
				batch = append(batch, h)
				delete(w.pending, h)
			}
			if overflow {
				clear(w.pending)
			}
			w.mu.Unlock()
			if overflow {
				w.c.clearHeld()
				continue
			}
			if len(batch) == 0 {
				break
			}
			w.c.checkLoadable(w.ctx, batch)
		}
	}
}

// checkLoadable reports the prefixes of batch that are no longer
// loadable, as MatchedTokens sees them: a prefix saved again since its
// key went away is not reported. It holds eventsMu through the check, so
// that a save completing a prefix meanwhile reports it stored after its
// removal. If the check fails, it cannot tell, and reports
// AllBlocksCleared.
func (c *connector) checkLoadable(ctx context.Context, batch []kv.BlockHash) {
	c.eventsMu.Lock()
	defer c.eventsMu.Unlock()
	emit := c.emit.Get()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(c.opts.ReadTimeout+c.opts.WriteTimeout))
	defer cancel()
	complete, err := c.complete(ctx, batch)
	if err != nil {
		c.failed(err)
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			c.held.Cleared(emit)
		}
		return
	}
	for i, h := range batch {
		if !complete[i] {
			c.held.Removed(h, kv.MediumRedis, emit)
		}
	}
}
