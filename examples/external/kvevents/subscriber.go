package kvevents

import (
	"bytes"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// maxSubscriptions bounds the distinct prefixes one peer may subscribe
// to; a publisher has one topic, so a real subscriber needs one or two.
const maxSubscriptions = 64

// subscriber is one PUB connection: its subscriptions, and a queue of
// batches bounded by hwm and MaxQueueBytes that its own writer drains,
// so that a slow peer costs only its own queue.
type subscriber struct {
	p *Publisher
	c net.Conn

	mu       sync.Mutex
	q        []published
	qBytes   int // payload bytes queued or being written
	sending  int // batches the writer took from q and is writing
	ctl      []net.Buffers
	closing  bool // send what is queued, then end
	stopped  bool // end now
	prefixes map[string]int
	matches  atomic.Bool

	wake chan struct{}
	done chan struct{} // the writer ended
}

func newSubscriber(p *Publisher, c net.Conn) *subscriber {
	return &subscriber{
		p:        p,
		c:        c,
		prefixes: map[string]int{},
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
}

func (s *subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// offer queues m if the peer subscribed to topic, or drops it and counts
// the drop if the queue is full.
func (s *subscriber) offer(topic []byte, m published) {
	if !s.matches.Load() {
		return
	}
	s.mu.Lock()
	if s.stopped || s.closing {
		s.mu.Unlock()
		return
	}
	// Batches being written count against hwm too, so that taking a burst
	// off the queue does not make room for another hwm of them.
	full := len(s.q)+s.sending >= s.p.cfg.HWM || s.qBytes+len(m.payload) > s.p.opts.MaxQueueBytes
	if !full {
		s.q = append(s.q, m)
		s.qBytes += len(m.payload)
	}
	s.mu.Unlock()
	if full {
		s.p.subscriberDropped(1)
		return
	}
	s.signal()
}

// handle applies a subscription change or answers a PING.
func (s *subscriber) handle(m message) {
	var subscribe bool
	var prefix []byte
	if m.command {
		name, data, err := parseCommand(m.frames[0])
		if err != nil {
			return
		}
		switch name {
		case "SUBSCRIBE":
			subscribe, prefix = true, data
		case "CANCEL":
			prefix = data
		case "PING":
			s.mu.Lock()
			if len(s.ctl) < 4 {
				s.ctl = append(s.ctl, pong(data))
			}
			s.mu.Unlock()
			s.signal()
			return
		default:
			return
		}
	} else {
		// ZMTP 3.0: a one-frame message, 1 or 0 and the prefix. A PUB
		// socket discards anything else a peer sends.
		if len(m.frames) != 1 || len(m.frames[0]) == 0 || m.frames[0][0] > 1 {
			return
		}
		subscribe, prefix = m.frames[0][0] == 1, m.frames[0][1:]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := string(prefix)
	if subscribe {
		if _, ok := s.prefixes[k]; !ok && len(s.prefixes) >= maxSubscriptions {
			return
		}
		s.prefixes[k]++
	} else if n, ok := s.prefixes[k]; ok {
		if n <= 1 {
			delete(s.prefixes, k)
		} else {
			s.prefixes[k] = n - 1
		}
	}
	match := false
	for pre := range s.prefixes {
		if bytes.HasPrefix(s.p.topic, []byte(pre)) {
			match = true
			break
		}
	}
	s.matches.Store(match)
}

// A write takes what is queued, up to maxWriteBatches batches and, past
// the first, maxWriteBytes of payload, in one system call.
const (
	maxWriteBatches = 64
	maxWriteBytes   = 256 << 10
)

// write sends the queue; on an error, or when the peer takes no whole
// message for WriteTimeout, it disconnects the peer.
func (s *subscriber) write() {
	defer close(s.done)
	var (
		out  []published
		bufs net.Buffers
		ends []int64 // where each control message and batch ends in bufs
	)
	for {
		s.mu.Lock()
		ctl := s.ctl
		s.ctl = nil
		n, size := 0, 0
		for n < len(s.q) && n < maxWriteBatches && (n == 0 || size+len(s.q[n].payload) <= maxWriteBytes) {
			size += len(s.q[n].payload)
			n++
		}
		out = append(out[:0], s.q[:n]...)
		s.sending = n
		clear(s.q[:n])
		if s.q = s.q[n:]; len(s.q) == 0 {
			s.q = nil
		}
		stopped, closing := s.stopped, s.closing
		s.mu.Unlock()
		if stopped {
			return
		}
		if len(ctl) == 0 && n == 0 {
			if closing {
				s.c.Close()
				return
			}
			select {
			case <-s.wake:
			case <-s.p.ctx.Done():
				s.stop()
				return
			}
			continue
		}
		// Control messages go first, between whole messages, as ZMTP
		// wants them; one write and one failure path serve both.
		bufs, ends = bufs[:0], ends[:0]
		var at int64
		add := func(b net.Buffers) {
			for _, x := range b {
				at += int64(len(x))
			}
			bufs = append(bufs, b...)
			ends = append(ends, at)
		}
		for _, b := range ctl {
			add(b)
		}
		for _, m := range out {
			add(wireMessage(s.p.topic, m.seq, m.payload))
		}
		clear(out)
		all := bufs
		whole, err := s.send(&bufs, ends)
		clear(all) // let the payloads go
		bufs = all[:0]
		s.mu.Lock()
		if !s.stopped { // stop zeroed the counts
			s.qBytes -= size
			s.sending = 0
		}
		s.mu.Unlock()
		if err != nil {
			s.p.log.Debug("kv events: subscriber disconnected", "remote", s.c.RemoteAddr(), "err", err)
			// What the connection took whole the peer reads after a cut
			// for time (Stats.SubscriberDrops).
			s.p.subscriberDropped(n - max(0, whole-len(ctl)))
			s.stop()
			return
		}
	}
}

// send writes bufs, whose messages end at ends, under a deadline of
// WriteTimeout that is renewed while each one sees at least one whole
// message taken: a slow peer is served a message at a time, as if each
// had a write of its own, and a stalled one is cut after WriteTimeout.
// It returns how many messages were taken whole.
func (s *subscriber) send(bufs *net.Buffers, ends []int64) (int, error) {
	var written int64
	whole := 0
	for {
		if err := s.c.SetWriteDeadline(time.Now().Add(s.p.opts.WriteTimeout)); err != nil {
			return whole, err
		}
		n, err := bufs.WriteTo(s.c)
		written += n
		before := whole
		for whole < len(ends) && ends[whole] <= written {
			whole++
		}
		if err == nil || whole == before || !errors.Is(err, os.ErrDeadlineExceeded) {
			return whole, err
		}
	}
}

// stop ends the connection now; what was queued is counted as dropped.
func (s *subscriber) stop() {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		s.p.subscriberDropped(len(s.q))
		s.q, s.qBytes, s.sending = nil, 0, 0
	}
	s.mu.Unlock()
	s.c.Close()
	s.signal()
}

// closeQueue makes the writer end once the queue is sent.
func (s *subscriber) closeQueue() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.signal()
}
