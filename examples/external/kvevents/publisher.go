package kvevents

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// ErrDisabled is returned by [New] for a config that asks for no events.
var ErrDisabled = errors.New("kv events: not enabled (enable_kv_cache_events is false or publisher is \"null\")")

// Options are kvgen's settings beside vLLM's config. The zero value takes
// every default.
type Options struct {
	// Encoding of events inside a batch: [Maps] (vLLM's current one, the
	// default) or [Arrays].
	Encoding Encoding
	// DataParallelRank is the batch's data_parallel_rank, and is added to
	// the endpoints' TCP ports, as vLLM does for each data-parallel rank.
	DataParallelRank int
	// WriteTimeout bounds how long a subscriber may take no whole
	// message (a subscriber is cut once a whole WriteTimeout passes in
	// which it took none, so after one to two of them), and each write to
	// a replay peer, so one stalled reader stops no one else. Default 5s.
	WriteTimeout time.Duration
	// HandshakeTimeout bounds a new connection's greeting and READY.
	// Default 5s.
	HandshakeTimeout time.Duration
	// MaxSubscribers bounds PUB connections; more are closed at once.
	// Default 128.
	MaxSubscribers int
	// MaxReplayConns bounds replay connections. Default 16.
	MaxReplayConns int
	// MaxQueueBytes bounds each subscriber's queue in payload bytes,
	// beside hwm's bound in batches. Default 64 MiB.
	MaxQueueBytes int
	// MaxReplayBytes bounds the replay buffer's payload bytes, beside
	// buffer_steps' bound in batches; the newest batch is kept even if
	// it alone is larger. Default 64 MiB.
	MaxReplayBytes int
	// ReplayIdle is how long a replay connection may wait for its next
	// request before it is closed, so that idle peers cannot hold every
	// replay slot; a DEALER reconnects when it next asks. Default 60s.
	ReplayIdle time.Duration
	// MaxPeerFrame caps a frame a peer sends (subscriptions, replay
	// requests, commands); a larger one closes the connection before
	// anything is allocated for it. Default 4096.
	MaxPeerFrame int
	// Gather is how long the publisher waits, once something is queued,
	// before it sends what is queued then: events emitted meanwhile share
	// a batch, as a vLLM engine step's events do, and a busy host's
	// events cost a few wake-ups and writes a Gather, not one per event
	// or request. It delays each event by at most that much. The wait ends
	// early on Close, on Flush, and once 256 calls (or half of
	// max_queue_size, if that is fewer) are waiting. Default 10ms, about
	// one step of a vLLM engine that is decoding; a negative Gather sends
	// at once.
	Gather time.Duration
	// Linger is how long Close keeps sending queued batches. Default 1s,
	// vLLM's shutdown timeout.
	Linger time.Duration
	// Logger takes connection errors and rate-limited drop reports.
	// Default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 5 * time.Second
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	if o.MaxSubscribers <= 0 {
		o.MaxSubscribers = 128
	}
	if o.MaxReplayConns <= 0 {
		o.MaxReplayConns = 16
	}
	if o.MaxQueueBytes <= 0 {
		o.MaxQueueBytes = 64 << 20
	}
	if o.MaxReplayBytes <= 0 {
		o.MaxReplayBytes = 64 << 20
	}
	if o.ReplayIdle <= 0 {
		o.ReplayIdle = time.Minute
	}
	if o.MaxPeerFrame <= 0 {
		o.MaxPeerFrame = 4096
	}
	if o.Gather == 0 {
		o.Gather = 10 * time.Millisecond
	}
	if o.Linger <= 0 {
		o.Linger = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Stats are the publisher's counters, for metrics.
type Stats struct {
	// Sequenced counts the batches given a sequence number: published,
	// dropped, or still queued. All are sent or dropped once Published
	// plus Dropped reaches it.
	Sequenced uint64
	// Published counts batches sent out (to every subscriber whose
	// subscription matches the topic, and into the replay buffer).
	Published uint64
	// Dropped counts batches never published: a Publish or Emit call found
	// max_queue_size calls waiting or the publisher closed, or a batch
	// could not be encoded. Each still took its sequence number (a dropped
	// call one of its own), so subscribers see the gap.
	Dropped uint64
	// SubscriberDrops counts batches one subscriber did not get: its queue
	// was at hwm or MaxQueueBytes, or it was disconnected with batches
	// queued, or being written and not yet handed whole to its
	// connection. (What the connection took the peer reads after a cut
	// for time; a reset may lose it uncounted.)
	SubscriberDrops uint64
	// Subscribers is the number of PUB connections now.
	Subscribers int
	// Subscribed is how many of them have a subscription that matches the
	// topic: those that get the batches. A PUB socket sends a subscriber
	// nothing before its subscription arrives.
	Subscribed int
	// Refused counts connections closed at once: over a cap, or a bad
	// greeting or handshake.
	Refused uint64
	// Replays counts replay requests served.
	Replays uint64
}

// Publisher puts batches of kv events on vLLM's wire: a ZeroMQ PUB socket
// sending [topic, seq, payload] messages, and optionally a ROUTER socket
// replaying the latest batches. Its methods are safe for concurrent use.
type Publisher struct {
	cfg   Config
	opts  Options
	topic []byte
	log   *slog.Logger

	mu        sync.Mutex // orders seq with the queue
	nextSeq   uint64
	closed    bool
	queue     []batch       // waiting to be encoded
	calls     int           // Publish and Emit calls in queue, at most max_queue_size
	open      bool          // queue's last batch is Emit's and may take more events
	flush     bool          // Flush asks that what is queued go without waiting out Gather
	openBytes int           // its events' estimated encoding
	spare     []batch       // the queue's last array, emptied, for reuse
	wake      chan struct{} // run has a batch, Close, Flush or enough calls to see
	// enough is how many calls waiting end Gather's wait early.
	enough int
	// batchBytes bounds an Emit batch's estimated encoding, well under
	// a subscriber's MaxQueueBytes.
	batchBytes int

	ringMu    sync.Mutex
	ring      []published // the latest batches, oldest first
	ringBytes int         // their payloads' bytes

	subsMu   sync.Mutex
	subs     map[*subscriber]struct{} // after their handshake
	pubConns int
	replays  int

	listeners []net.Listener
	pubL      net.Listener
	replayL   net.Listener
	ctx       context.Context
	cancel    context.CancelFunc
	runDone   chan struct{}
	conns     sync.WaitGroup
	closeOnce sync.Once

	published, dropped, subDrops, refused, served atomic.Uint64
	dropLog, subDropLog, cutLog, badReplayLog     rateLog
	stopAfter                                     func() bool // releases New's ctx
}

// maxBatchEvents bounds the events Emit gathers into one batch, and
// maxBatchBytes their estimated encoding, so that a burst goes out as
// several bounded payloads rather than one that no subscriber's queue
// could take.
const (
	maxBatchEvents = 256
	maxBatchBytes  = 256 << 10
)

// gatherEnough is how many calls waiting end Gather's wait early: a full
// batch's worth, past which waiting longer saves no wake-up worth having
// and only delays. A max_queue_size under twice that ends it at half the
// queue, so that the wait never fills the queue and drops calls.
const gatherEnough = maxBatchEvents

type batch struct {
	seq    uint64
	ts     float64
	events []kv.KVEvent
}

type published struct {
	seq     []byte // 8 bytes, big-endian
	payload []byte
}

// New starts a publisher for cfg: it binds or connects the endpoint and
// binds the replay endpoint, if any. It returns [ErrDisabled] if cfg does
// not enable events. Cancelling ctx closes the publisher as Close does.
func New(ctx context.Context, cfg Config, opts Options) (*Publisher, error) {
	if !cfg.Enabled() {
		return nil, ErrDisabled
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	pub, err := parseEndpoint(cfg.Endpoint, opts.DataParallelRank, false)
	if err != nil {
		return nil, fmt.Errorf("kv events: endpoint: %w", err)
	}
	p := &Publisher{
		cfg:     cfg,
		opts:    opts,
		topic:   []byte(cfg.Topic),
		log:     opts.Logger,
		wake:    make(chan struct{}, 1),
		subs:    map[*subscriber]struct{}{},
		runDone: make(chan struct{}),
		// A quarter of a subscriber's queue, so that a batch never
		// fills it alone.
		batchBytes: min(maxBatchBytes, opts.MaxQueueBytes/4),
		enough:     max(1, min(gatherEnough, cfg.MaxQueueSize/2)),
	}
	for _, r := range []*rateLog{&p.dropLog, &p.subDropLog, &p.cutLog, &p.badReplayLog} {
		r.log = p.log
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if pub.bind {
		l, err := listen(pub)
		if err != nil {
			return nil, fmt.Errorf("kv events: %w", err)
		}
		p.listeners = append(p.listeners, l)
		p.pubL = l
	}
	if cfg.ReplayEndpoint != "" {
		rep, err := parseEndpoint(cfg.ReplayEndpoint, opts.DataParallelRank, true)
		if err == nil {
			var l net.Listener
			if l, err = listen(rep); err == nil {
				p.listeners = append(p.listeners, l)
				p.replayL = l
				p.conns.Add(1)
				go p.accept(l, true)
			}
		}
		if err != nil {
			for _, l := range p.listeners {
				l.Close()
			}
			return nil, fmt.Errorf("kv events: replay: %w", err)
		}
	}
	if pub.bind {
		p.conns.Add(1)
		go p.accept(p.pubL, false)
	} else {
		p.conns.Add(1)
		go p.dial(pub)
	}
	go p.run()
	// ctx may be done already: Close waits until stopAfter is set.
	ready := make(chan struct{})
	p.stopAfter = context.AfterFunc(ctx, func() {
		<-ready
		p.Close()
	})
	close(ready)
	return p, nil
}

func listen(e endpoint) (net.Listener, error) {
	if e.network == "unix" {
		// A socket file left by a process that is gone would stop the
		// bind, and ZeroMQ replaces it; one a live process listens on is
		// that process's, and anything else is not a socket kvgen made.
		if fi, err := os.Lstat(e.address); err == nil && fi.Mode()&os.ModeSocket != 0 {
			c, err := net.DialTimeout("unix", e.address, time.Second)
			if err == nil {
				c.Close()
				return nil, fmt.Errorf("%q: another process listens on it", e)
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				// The syscall's error alone: the path is quoted already.
				var se *os.SyscallError
				if errors.As(err, &se) {
					err = se.Err
				}
				return nil, fmt.Errorf("%q: a socket file is there, and connecting to it failed: %w", e, err)
			}
			os.Remove(e.address)
		}
	}
	return net.Listen(e.network, e.address)
}

// PubAddr returns the address the PUB socket is bound to (useful with
// port 0), or nil when it connects out.
func (p *Publisher) PubAddr() net.Addr {
	if p.pubL == nil {
		return nil
	}
	return p.pubL.Addr()
}

// ReplayAddr returns the address the replay socket is bound to, or nil.
func (p *Publisher) ReplayAddr() net.Addr {
	if p.replayL == nil {
		return nil
	}
	return p.replayL.Addr()
}

// Publish sends events as one batch of their own, with the next sequence
// number. It never blocks: when max_queue_size calls are waiting, the
// batch is dropped and counted. The events are Publish's to keep. After
// Close it drops the batch.
func (p *Publisher) Publish(events []kv.KVEvent) {
	ts := unixSeconds(time.Now())
	p.mu.Lock()
	if !p.roomLocked() {
		p.mu.Unlock()
		p.countDrop()
		return
	}
	first := len(p.queue) == 0
	// The queue grows as batches wait, rather than being allocated at
	// max_queue_size: the garbage collector scans all of a queue's array,
	// and a host's saves keep it collecting.
	p.queue = append(p.queue, batch{seq: p.nextSeq, ts: ts, events: events})
	p.nextSeq++
	p.calls++
	p.open = false // an Emit after it starts a batch after it
	wake := first || p.calls == p.enough
	p.mu.Unlock()
	if wake {
		p.signal()
	}
}

// Emit publishes one event. Events queued within a Gather of the first
// one queued, or while the publisher's goroutine is busy, share a batch,
// as a vLLM engine step's events do, up to 256 events or about 256 KiB of
// payload; each event counts as one call against max_queue_size, past
// which it is dropped and counted as Publish's batches are. Pass it to a
// connector's [kv.EventReporter.ReportEvents].
func (p *Publisher) Emit(e kv.KVEvent) {
	size := eventSize(&e)
	p.mu.Lock()
	if !p.roomLocked() {
		p.mu.Unlock()
		p.countDrop()
		return
	}
	p.calls++
	// Only the queue's first call wakes run, and the call that makes it
	// long enough that waiting out Gather gains nothing: run takes
	// everything queued when it wakes, so the events behind cost no
	// hand-off of their own.
	wake := len(p.queue) == 0 || p.calls == p.enough
	if p.open && len(p.queue[len(p.queue)-1].events) < maxBatchEvents && p.openBytes+size <= p.batchBytes {
		b := &p.queue[len(p.queue)-1]
		b.events = append(b.events, e)
		p.openBytes += size
	} else {
		p.queue = append(p.queue, batch{seq: p.nextSeq, ts: unixSeconds(time.Now()), events: []kv.KVEvent{e}})
		p.nextSeq++
		p.open, p.openBytes = true, size
	}
	p.mu.Unlock()
	if wake {
		p.signal()
	}
}

// Flush sends what is queued now, without waiting out Gather: a host
// whose work goes in steps calls it as each step ends, as a vLLM engine
// publishes a step's events when the step ends. It returns at once.
func (p *Publisher) Flush() {
	p.mu.Lock()
	queued := len(p.queue) > 0
	p.flush = p.flush || queued
	p.mu.Unlock()
	if queued {
		p.signal()
	}
}

// roomLocked reports whether a call may queue; the caller holds p.mu. A
// call that may not is dropped but takes a sequence number, so that
// subscribers see the gap, and closes the open batch, so that events
// emitted after it go out after the gap.
func (p *Publisher) roomLocked() bool {
	if !p.closed && p.calls < p.cfg.MaxQueueSize {
		return true
	}
	p.nextSeq++
	p.open = false
	return false
}

func (p *Publisher) countDrop() {
	p.dropped.Add(1)
	p.dropLog.report("kv events: batches dropped before sending (queue full or publisher closed)", 1)
}

// subscriberDropped counts and logs n batches a subscriber did not get.
func (p *Publisher) subscriberDropped(n int) {
	if n > 0 {
		p.subDrops.Add(uint64(n))
		p.subDropLog.report("kv events: batches a subscriber did not get (its queue was full, or it was disconnected)", uint64(n))
	}
}

func (p *Publisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// eventSize is an upper bound on e's msgpack encoding, to bound a batch's
// payload without encoding it: field names and tags, 9 bytes a hash, 5 a
// token.
func eventSize(e *kv.KVEvent) int {
	return 192 + len(e.Medium) + len(e.LoraName) + 9*len(e.BlockHashes) + 5*len(e.TokenIDs)
}

// Stats returns the counters.
func (p *Publisher) Stats() Stats {
	p.subsMu.Lock()
	n, subscribed := len(p.subs), 0
	for s := range p.subs {
		if s.matches.Load() {
			subscribed++
		}
	}
	p.subsMu.Unlock()
	p.mu.Lock()
	sequenced := p.nextSeq
	p.mu.Unlock()
	return Stats{
		Sequenced:       sequenced,
		Published:       p.published.Load(),
		Dropped:         p.dropped.Load(),
		SubscriberDrops: p.subDrops.Load(),
		Subscribers:     n,
		Subscribed:      subscribed,
		Refused:         p.refused.Load(),
		Replays:         p.served.Load(),
	}
}

// Close stops accepting batches, sends those queued for up to Linger,
// and closes every connection and socket.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.stopAfter()
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.signal()
		<-p.runDone
		for _, l := range p.listeners {
			l.Close()
		}
		// Each subscriber's writer sends what is queued, then ends.
		p.subsMu.Lock()
		subs := make([]*subscriber, 0, len(p.subs))
		for s := range p.subs {
			subs = append(subs, s)
			s.closeQueue()
		}
		p.subsMu.Unlock()
		linger := time.NewTimer(p.opts.Linger)
	wait:
		for _, s := range subs {
			select {
			case <-s.done:
			case <-linger.C:
				break wait
			}
		}
		linger.Stop()
		p.cancel()
		p.conns.Wait()
		p.dropLog.flush()
		p.subDropLog.flush()
		p.cutLog.flush()
		p.badReplayLog.flush()
	})
	return nil
}

// run sends queued batches in order until Close, then what is left. It
// takes all that is queued at once, a Gather after it saw the first of
// it, so a burst costs one wake-up.
func (p *Publisher) run() {
	defer close(p.runDone)
	var gather *time.Timer
	if p.opts.Gather > 0 {
		gather = time.NewTimer(p.opts.Gather)
		defer gather.Stop()
	}
	for {
		p.mu.Lock()
		queued, closed := len(p.queue) > 0, p.closed
		p.mu.Unlock()
		if !queued {
			if closed {
				return
			}
			<-p.wake
			continue
		}
		if gather != nil {
			p.gather(gather)
		}
		p.mu.Lock()
		q := p.queue
		p.queue, p.spare = p.spare, nil
		p.calls, p.open, p.flush = 0, false, false
		p.mu.Unlock()
		for _, b := range q {
			p.send(b)
		}
		clear(q)
		if cap(q) <= 1024 { // a burst's array is let go
			p.mu.Lock()
			p.spare = q[:0]
			p.mu.Unlock()
		}
	}
}

// hurryLocked reports whether what is queued goes without waiting out
// Gather; the caller holds p.mu.
func (p *Publisher) hurryLocked() bool {
	return p.closed || p.flush || p.calls >= p.enough
}

// gather waits out Gather, or until Close, Flush or enough calls waiting;
// if one of those came already, it returns at once.
func (p *Publisher) gather(t *time.Timer) {
	t.Reset(p.opts.Gather)
	for {
		// Each of those sets its state before it signals, so a signal
		// that comes after this check ends the select. One that does not
		// hurry (a first call's, come late) only checks again.
		p.mu.Lock()
		hurry := p.hurryLocked()
		p.mu.Unlock()
		if hurry {
			return
		}
		select {
		case <-t.C:
			return
		case <-p.wake:
		}
	}
}

// send encodes b, keeps it for replay and hands it to the subscribers.
func (p *Publisher) send(b batch) {
	payload, err := encodeBatch(b.ts, b.events, p.opts.DataParallelRank, p.opts.Encoding)
	if err != nil {
		p.dropped.Add(1)
		p.log.Error("kv events: batch not encoded", "seq", b.seq, "err", err)
		return
	}
	m := published{seq: binary.BigEndian.AppendUint64(nil, b.seq), payload: payload}
	p.remember(m)
	p.subsMu.Lock()
	for s := range p.subs {
		s.offer(p.topic, m)
	}
	p.subsMu.Unlock()
	p.published.Add(1)
}

// remember keeps m for replay, and lets the oldest batches go past
// buffer_steps or MaxReplayBytes.
func (p *Publisher) remember(m published) {
	if p.cfg.BufferSteps == 0 || p.cfg.ReplayEndpoint == "" {
		return
	}
	p.ringMu.Lock()
	defer p.ringMu.Unlock()
	p.ring = append(p.ring, m)
	p.ringBytes += len(m.payload)
	for len(p.ring) > 1 && (len(p.ring) > p.cfg.BufferSteps || p.ringBytes > p.opts.MaxReplayBytes) {
		p.ringBytes -= len(p.ring[0].payload)
		p.ring[0] = published{}
		p.ring = p.ring[1:]
	}
}

// since returns up to n buffered batches from seq start through last,
// oldest first.
func (p *Publisher) since(start, last uint64, n int) []published {
	p.ringMu.Lock()
	defer p.ringMu.Unlock()
	i, _ := slices.BinarySearchFunc(p.ring, start, func(m published, seq uint64) int {
		return cmp.Compare(binary.BigEndian.Uint64(m.seq), seq)
	})
	var out []published
	for _, m := range p.ring[i:] {
		if len(out) == n || binary.BigEndian.Uint64(m.seq) > last {
			break
		}
		out = append(out, m)
	}
	return out
}

// newest is the sequence number of the newest buffered batch, and false
// if there is none.
func (p *Publisher) newest() (uint64, bool) {
	p.ringMu.Lock()
	defer p.ringMu.Unlock()
	if len(p.ring) == 0 {
		return 0, false
	}
	return binary.BigEndian.Uint64(p.ring[len(p.ring)-1].seq), true
}

func (p *Publisher) accept(l net.Listener, replay bool) {
	defer p.conns.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			p.log.Warn("kv events: accept", "err", err)
			select {
			case <-time.After(100 * time.Millisecond):
			case <-p.ctx.Done():
				return
			}
			continue
		}
		p.conns.Add(1)
		if replay {
			go p.serveReplay(c)
		} else {
			go p.serveSubscriber(c, true)
		}
	}
}

// dial connects to a bound SUB socket, and again after the connection
// ends, as ZeroMQ reconnects.
func (p *Publisher) dial(e endpoint) {
	defer p.conns.Done()
	backoff := 100 * time.Millisecond
	var said time.Time
	for p.ctx.Err() == nil {
		d := net.Dialer{Timeout: p.opts.HandshakeTimeout}
		c, err := d.DialContext(p.ctx, e.network, e.address)
		if err != nil && p.ctx.Err() == nil && time.Since(said) >= dropLogInterval {
			// A misspelt host would otherwise retry forever unseen.
			p.log.Warn("kv events: cannot connect to the endpoint; retrying", "endpoint", e.String(), "err", err)
			said = time.Now()
		}
		if err == nil {
			p.conns.Add(1)
			if p.serveSubscriber(c, false) {
				backoff = 100 * time.Millisecond
			}
		}
		select {
		case <-time.After(backoff):
		case <-p.ctx.Done():
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// serveSubscriber runs a PUB connection: it reads the peer's
// subscriptions while a writer sends its queue. It reports whether the
// handshake succeeded.
func (p *Publisher) serveSubscriber(c net.Conn, asServer bool) bool {
	defer p.conns.Done()
	defer c.Close()
	if !p.admit(&p.pubConns, p.opts.MaxSubscribers) {
		return false
	}
	defer p.release(&p.pubConns)
	stop := context.AfterFunc(p.ctx, func() { c.Close() })
	defer stop()
	if _, err := handshake(c, "PUB", asServer, time.Now().Add(p.opts.HandshakeTimeout), p.opts.MaxPeerFrame); err != nil {
		p.refused.Add(1)
		p.log.Debug("kv events: subscriber refused", "remote", c.RemoteAddr(), "err", err)
		return false
	}
	s := newSubscriber(p, c)
	p.subsMu.Lock()
	p.subs[s] = struct{}{}
	p.subsMu.Unlock()
	defer func() {
		p.subsMu.Lock()
		delete(p.subs, s)
		p.subsMu.Unlock()
	}()
	p.conns.Add(1)
	go func() {
		defer p.conns.Done()
		s.write()
	}()
	for {
		m, err := readMessage(c, p.opts.MaxPeerFrame, p.opts.MaxPeerFrame)
		if err != nil {
			if errors.Is(err, errFrameTooLarge) {
				p.cutLog.report("kv events: peers cut for a frame over MaxPeerFrame", 1)
			}
			s.stop()
			<-s.done
			return true
		}
		s.handle(m)
	}
}

// admit counts a connection in *n, or refuses it when *n is at limit
// or the publisher is closing.
func (p *Publisher) admit(n *int, limit int) bool {
	p.subsMu.Lock()
	ok := *n < limit && p.ctx.Err() == nil
	if ok {
		*n++
	}
	p.subsMu.Unlock()
	if !ok {
		p.refused.Add(1)
	}
	return ok
}

func (p *Publisher) release(n *int) {
	p.subsMu.Lock()
	*n--
	p.subsMu.Unlock()
}

// serveReplay answers replay requests on a ROUTER connection: a
// request's frames are an empty delimiter and an 8-byte big-endian
// sequence number; the reply is [b"", topic, seq, payload] for every
// buffered batch from it on, the live message's frames byte for byte,
// then [b"", b"", 0xFF×8, b""]. That is vLLM's layout since v0.26.0
// (vllm-project/vllm#45177): before, a reply had no topic, and a router
// that indexes by the topic's pod could not place replayed batches.
func (p *Publisher) serveReplay(c net.Conn) {
	defer p.conns.Done()
	defer c.Close()
	if !p.admit(&p.replays, p.opts.MaxReplayConns) {
		return
	}
	defer p.release(&p.replays)
	stop := context.AfterFunc(p.ctx, func() { c.Close() })
	defer stop()
	if _, err := handshake(c, "ROUTER", true, time.Now().Add(p.opts.HandshakeTimeout), p.opts.MaxPeerFrame); err != nil {
		p.refused.Add(1)
		p.log.Debug("kv events: replay peer refused", "remote", c.RemoteAddr(), "err", err)
		return
	}
	write := func(b net.Buffers) error {
		if err := c.SetWriteDeadline(time.Now().Add(p.opts.WriteTimeout)); err != nil {
			return err
		}
		_, err := b.WriteTo(c)
		return err
	}
	end := []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	for {
		if err := c.SetReadDeadline(time.Now().Add(p.opts.ReplayIdle)); err != nil {
			return
		}
		m, err := readMessage(c, p.opts.MaxPeerFrame, p.opts.MaxPeerFrame)
		if err != nil {
			if errors.Is(err, errFrameTooLarge) {
				p.cutLog.report("kv events: peers cut for a frame over MaxPeerFrame", 1)
			}
			return
		}
		if m.command {
			name, data, err := parseCommand(m.frames[0])
			if err != nil {
				return
			}
			if name == "PING" {
				if write(pong(data)) != nil {
					return
				}
			}
			continue
		}
		if len(m.frames) != 2 || len(m.frames[0]) != 0 || len(m.frames[1]) != 8 {
			// As vLLM does: the request is ignored, and said.
			p.badReplayLog.report("kv events: replay requests ignored, not [\"\", 8-byte start_seq]", 1)
			continue
		}
		p.served.Add(1)
		if p.replay(write, binary.BigEndian.Uint64(m.frames[1])) != nil || write(wireMessage(nil, nil, end, nil)) != nil {
			return
		}
	}
}

// replayChunk is how many batches a replay takes from the buffer at a
// time: a peer that reads slowly holds no more of them than that.
const replayChunk = 64

// replay writes the buffered batches from seq start through the newest
// when the request came, a chunk at a time. A batch the buffer lets go
// while a slow peer reads is not sent; the peer sees the gap in seq.
func (p *Publisher) replay(write func(net.Buffers) error, start uint64) error {
	last, ok := p.newest()
	for ok && start <= last {
		ms := p.since(start, last, replayChunk)
		if len(ms) == 0 {
			return nil
		}
		for _, m := range ms {
			if err := write(wireMessage(nil, p.topic, m.seq, m.payload)); err != nil {
				return err
			}
		}
		start = binary.BigEndian.Uint64(ms[len(ms)-1].seq) + 1
		ok = start != 0 // past the last sequence number there is
	}
	return nil
}

// rateLog reports a count of drops at most once per interval.
type rateLog struct {
	log     *slog.Logger
	mu      sync.Mutex
	last    time.Time
	pending uint64
	msg     string
}

const dropLogInterval = 10 * time.Second

func (r *rateLog) report(msg string, n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending += n
	r.msg = msg
	if time.Since(r.last) >= dropLogInterval {
		r.log.Warn(msg, "count", r.pending, "since", r.last)
		r.pending, r.last = 0, time.Now()
	}
}

func (r *rateLog) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending > 0 {
		r.log.Warn(r.msg, "count", r.pending, "since", r.last)
		r.pending = 0
	}
}
