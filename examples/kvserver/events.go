package main

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// event is one KV event as every follower sends it: encoded once, by the
// first follower to send it, and shared.
type event struct {
	e    kv.KVEvent
	size int64 // an upper bound of what it holds, encoded or not
	once sync.Once
	line []byte
}

// newEvent wraps e. Its size bounds the event's slices and its JSON line:
// a token id is at most 11 bytes of JSON, a block hash 67.
func newEvent(e kv.KVEvent) *event {
	return &event{e: e, size: 512 + 16*int64(len(e.TokenIDs)) + 100*int64(len(e.BlockHashes))}
}

// encoded returns the event's JSON line.
func (ev *event) encoded() []byte {
	ev.once.Do(func() {
		b, _ := json.Marshal(ev.e) // a KVEvent always marshals
		ev.line = append(b, '\n')
		ev.e = kv.KVEvent{} // the line is all that is sent from now on
	})
	return ev.line
}

// follower is one GET /events stream: the events queued for it, at most
// the hub's lag in bytes.
type follower struct {
	rc   *http.ResponseController
	wake chan struct{} // a send when there is news: an event, or the end

	mu    sync.Mutex
	queue []*event
	bytes int64
	ended bool // dropped, or the server stops
}

// next returns the first queued event, or nil, and whether the stream has
// ended.
func (f *follower) next() (*event, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended || len(f.queue) == 0 {
		return nil, f.ended
	}
	ev := f.queue[0]
	f.queue[0] = nil
	f.queue = f.queue[1:]
	return ev, false
}

// arm gives the next write to the follower d to finish, unless the stream
// has ended: under the lock that end takes, so that end's deadline is never
// overwritten by a longer one.
func (f *follower) arm(d time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return false
	}
	// A ResponseController's deadline is the connection's, which any
	// goroutine may set (net.Conn).
	return f.rc.SetWriteDeadline(time.Now().Add(d)) == nil
}

// sent releases the bytes of an event sent.
func (f *follower) sent(ev *event) {
	f.mu.Lock()
	f.bytes -= ev.size
	f.mu.Unlock()
}

// end ends the stream, and a write that blocks on a follower that does not
// read ends at once with it.
func (f *follower) end() {
	f.mu.Lock()
	f.ended = true
	f.queue = nil
	_ = f.rc.SetWriteDeadline(time.Now())
	f.mu.Unlock()
	f.poke()
}

func (f *follower) poke() {
	select {
	case f.wake <- struct{}{}:
	default: // already poked
	}
}

// eventHub hands the connector's events to every follower. A follower
// whose queue would pass lag bytes is dropped, its stream ended, so that
// no follower holds memory without bound or slows the data path; it
// reconnects and rebuilds its view.
type eventHub struct {
	lag int64

	mu      sync.Mutex
	subs    map[*follower]bool
	closed  bool
	dropped int // followers dropped for falling behind
}

func newEventHub(lag int64) *eventHub {
	return &eventHub{lag: lag, subs: map[*follower]bool{}}
}

// subscribe adds a follower that writes through rc, or returns nil once
// the hub is closed.
func (h *eventHub) subscribe(rc *http.ResponseController) *follower {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	f := &follower{rc: rc, wake: make(chan struct{}, 1)}
	h.subs[f] = true
	return f
}

// unsubscribe removes a follower whose stream is over, counting it as
// dropped if it was too slow to take an event.
func (h *eventHub) unsubscribe(f *follower, slow bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[f] && slow {
		h.dropped++
	}
	delete(h.subs, f)
}

// publish is the connector's event function: it never blocks.
func (h *eventHub) publish(e kv.KVEvent) {
	ev := newEvent(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	for f := range h.subs {
		f.mu.Lock()
		// An event larger than the lag still reaches a follower that has
		// caught up.
		behind := f.bytes > 0 && f.bytes+ev.size > h.lag
		if !behind {
			f.queue = append(f.queue, ev)
			f.bytes += ev.size
		}
		f.mu.Unlock()
		if behind {
			delete(h.subs, f)
			h.dropped++
			f.end()
			continue
		}
		f.poke()
	}
}

// close ends every stream at once, also one blocked writing to a follower
// that does not read, and refuses new followers.
func (h *eventHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for f := range h.subs {
		delete(h.subs, f)
		f.end()
	}
}

// stats returns how many follow now, and how many were dropped.
func (h *eventHub) stats() (followers, dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs), h.dropped
}
