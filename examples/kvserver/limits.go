package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// limits bound what kvserver takes on: the prompt of a step, and in serve
// mode the connections, requests, tokens and time it gives clients. Each
// is a flag; the defaults are in defaultLimits.
type limits struct {
	PromptTokens   int // tokens of one prompt (-tokens, and a step's "tokens")
	Conns          int // connections open at once
	Requests       int // prefill and decode requests in flight
	TokensInFlight int // prompt tokens of the steps in flight
	BodyBytes      int64
	HeaderBytes    int

	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration // a request's header and body
	WriteTimeout      time.Duration // a request's answer, its work included
	IdleTimeout       time.Duration

	EventsWriteTimeout time.Duration // one event to one follower
	EventsLagBytes     int64         // events queued for one follower

	ShutdownTimeout     time.Duration
	ShutdownReadTimeout time.Duration // bodies still on their way at a stop
}

// defaultLimits are the limits' defaults. A token in flight holds about
// 500 bytes at the peak of a step (its KV, computed and loaded, and the
// garbage collector's headroom): four decodes of 1,048,576 tokens at once,
// the default tokens in flight, peak at about 2 GB.
var defaultLimits = limits{
	PromptTokens:   1 << 20,
	Conns:          256,
	Requests:       64,
	TokensInFlight: 4 << 20,
	BodyBytes:      1 << 20,
	HeaderBytes:    64 << 10,

	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      60 * time.Second,
	IdleTimeout:       60 * time.Second,

	EventsWriteTimeout: 10 * time.Second,
	EventsLagBytes:     16 << 20,

	ShutdownTimeout:     30 * time.Second,
	ShutdownReadTimeout: 5 * time.Second,
}

// flags registers the limits' flags on fs, with the defaults in l.
func (l *limits) flags(fs *flag.FlagSet) {
	fs.IntVar(&l.PromptTokens, "max-prompt-tokens", l.PromptTokens, "the most tokens a prompt may have: -tokens, and a serve step's \"tokens\"")
	fs.IntVar(&l.Conns, "max-conns", l.Conns, "serve: connections open at once; more wait to be accepted")
	fs.IntVar(&l.Requests, "max-requests", l.Requests, "serve: prefill and decode requests in flight; more are answered 503 with Retry-After")
	fs.IntVar(&l.TokensInFlight, "max-tokens-in-flight", l.TokensInFlight, "serve: prompt tokens of the steps in flight, which bounds the memory they hold (about 500 bytes a token); a step past it is answered 503 with Retry-After")
	fs.Int64Var(&l.BodyBytes, "max-body-bytes", l.BodyBytes, "serve: the largest request body")
	fs.IntVar(&l.HeaderBytes, "max-header-bytes", l.HeaderBytes, "serve: the largest request header")
	fs.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", l.ReadHeaderTimeout, "serve: time to read a request's header")
	fs.DurationVar(&l.ReadTimeout, "read-timeout", l.ReadTimeout, "serve: time to read a request, header and body")
	fs.DurationVar(&l.WriteTimeout, "write-timeout", l.WriteTimeout, "serve: time to answer a request, its step included; a step still running then is cancelled")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", l.IdleTimeout, "serve: how long a kept-alive connection may wait for its next request")
	fs.DurationVar(&l.EventsWriteTimeout, "events-write-timeout", l.EventsWriteTimeout, "serve: time to send one event to an /events follower; one slower is dropped")
	fs.Int64Var(&l.EventsLagBytes, "events-lag-bytes", l.EventsLagBytes, "serve: how far an /events follower may fall behind, in bytes of events queued for it; one further behind is dropped")
	fs.DurationVar(&l.ShutdownTimeout, "shutdown-timeout", l.ShutdownTimeout, "serve: how long a stop waits for the requests in flight")
	fs.DurationVar(&l.ShutdownReadTimeout, "shutdown-read-timeout", l.ShutdownReadTimeout, "serve: how long a stop waits for request bodies still on their way, and for answers a client is slow to take")
}

// check says which limit is out of range.
func (l *limits) check() error {
	var errs []error
	positive := func(name string, v int64) {
		if v < 1 {
			errs = append(errs, fmt.Errorf("-%s %d: want at least 1", name, v))
		}
	}
	positive("max-prompt-tokens", int64(l.PromptTokens))
	positive("max-conns", int64(l.Conns))
	positive("max-requests", int64(l.Requests))
	positive("max-tokens-in-flight", int64(l.TokensInFlight))
	positive("max-body-bytes", l.BodyBytes)
	positive("max-header-bytes", int64(l.HeaderBytes))
	positive("events-lag-bytes", l.EventsLagBytes)
	if l.TokensInFlight < l.PromptTokens {
		// Or a prompt of the largest size could never be served.
		errs = append(errs, fmt.Errorf("-max-tokens-in-flight %d: want at least -max-prompt-tokens (%d)", l.TokensInFlight, l.PromptTokens))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"read-header-timeout", l.ReadHeaderTimeout}, {"read-timeout", l.ReadTimeout}, {"write-timeout", l.WriteTimeout},
		{"idle-timeout", l.IdleTimeout}, {"events-write-timeout", l.EventsWriteTimeout},
		{"shutdown-timeout", l.ShutdownTimeout}, {"shutdown-read-timeout", l.ShutdownReadTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("-%s %v: want more than 0", d.name, d.v))
		}
	}
	return errors.Join(errs...)
}

// checkTokens checks a prompt's length against the limit.
func (l *limits) checkTokens(n int) error {
	if n < 1 || n > l.PromptTokens {
		return fmt.Errorf("want from 1 to %d (-max-prompt-tokens)", l.PromptTokens)
	}
	return nil
}

// gate admits work up to a bound, never waiting: what is past it is
// refused, so that a client can retry elsewhere or later.
type gate struct {
	max int64
	n   atomic.Int64
}

// take admits k more, or reports false and admits nothing.
func (g *gate) take(k int64) bool {
	for {
		n := g.n.Load()
		if n+k > g.max {
			return false
		}
		if g.n.CompareAndSwap(n, n+k) {
			return true
		}
	}
}

// give releases k taken.
func (g *gate) give(k int64) { g.n.Add(-k) }

// wait waits until nothing is admitted, or d passes.
func (g *gate) wait(d time.Duration) {
	for end := time.Now().Add(d); g.n.Load() > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
}

// limitListener accepts at most max connections open at once; Accept
// waits while that many are, as golang.org/x/net/netutil's LimitListener
// does, and the count is kept for /metrics.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	mu    sync.Mutex
	conns map[*limitConn]struct{} // open
}

func newLimitListener(l net.Listener, max int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, max), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	lc := &limitConn{Conn: c}
	lc.release = func() {
		l.mu.Lock()
		delete(l.conns, lc)
		l.mu.Unlock()
		<-l.sem
	}
	l.mu.Lock()
	if l.conns == nil {
		l.conns = map[*limitConn]struct{}{}
	}
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	return lc, nil
}

// cutWrites gives every open connection not in a step grace to take what
// is being written to it: a stop must not wait on a client that does not
// read (steps get theirs when they answer; see answerWriter).
func (l *limitListener) cutWrites(grace time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		if c.steps.Load() == 0 {
			_ = c.SetWriteDeadline(time.Now().Add(grace))
		}
	}
}

// Close stops Accept, also one that waits for a slot.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// open is how many connections are open.
func (l *limitListener) open() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.conns))
}

// limitConn frees its slot when closed, once.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
	steps   atomic.Int32 // steps being served on it
}

// connKey is the context key of a request's *limitConn.
type connKey struct{}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
