package kvevents

import (
	"encoding/binary"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// numbered is an event that carries n in its hash (as n+1: a hash is
// never 0 on the wire), to check order, and tokens tokens, to give it a
// size.
func numbered(n uint64, tokens int) kv.KVEvent {
	return kv.KVEvent{Kind: kv.BlockStored, BlockHashes: []kv.BlockHash{hash(n + 1)},
		TokenIDs: slices.Repeat([]uint32{1 << 20}, tokens), BlockSize: tokens}
}

// waitTaken waits until the publisher's goroutine has taken all that is
// queued.
func waitTaken(t *testing.T, p *Publisher) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d batches still queued", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitSettled waits until every batch sequenced is published or dropped.
func waitSettled(t *testing.T, p *Publisher) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := p.Stats()
		if st.Published+st.Dropped == st.Sequenced {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: batches still queued", st)
		}
		time.Sleep(time.Millisecond)
	}
}

// readEvents reads batches until they have brought the events numbered
// first up to end, checking that they come in order, and returns each
// batch's sequence number and event count. No batch may be empty, hold
// more than maxBatchEvents, or, unless it holds one event, more than
// maxBytes of payload.
func readEvents(t *testing.T, sub *peer, first, end uint64, maxBytes int) (seqs []uint64, sizes []int) {
	t.Helper()
	for next := first; next < end; {
		m := sub.msg()
		events, _ := decode(t, m[2])[1].([]any)
		for _, e := range events {
			hs, _ := e.(map[string]any)["block_hashes"].([]any)
			if want := []any{next + 1}; !reflect.DeepEqual(hs, want) {
				t.Fatalf("event %d names %#v, want %#v", next, hs, want)
			}
			next++
		}
		if len(events) == 0 || len(events) > maxBatchEvents || (len(events) > 1 && len(m[2]) > maxBytes) {
			t.Fatalf("batch %d holds %d events, %d bytes", len(seqs), len(events), len(m[2]))
		}
		seqs = append(seqs, binary.BigEndian.Uint64(m[1]))
		sizes = append(sizes, len(events))
	}
	return seqs, sizes
}

// consecutive reports whether seqs are from, from+1, ...
func consecutive(seqs []uint64, from uint64) bool {
	for i, s := range seqs {
		if s != from+uint64(i) {
			return false
		}
	}
	return true
}

// Emits in a burst go out in fewer batches than events, every event once
// and in order, each batch within maxBatchEvents and the byte bound.
func TestEmitBurstSharesBatches(t *testing.T) {
	t.Run("free", func(t *testing.T) {
		p := start(t, nil, Options{})
		sub := dialPeer(t, p.PubAddr(), "SUB")
		sub.subscribe("")
		waitPrefixes(t, p, 1)
		const n = 2000
		for i := range uint64(n) {
			p.Emit(numbered(i, 0))
		}
		seqs, sizes := readEvents(t, sub, 0, n, p.batchBytes)
		t.Logf("%d events in %d batches", n, len(seqs))
		if len(seqs) >= n || !consecutive(seqs, 0) {
			t.Errorf("%d events in batches %v of %v events", n, seqs, sizes)
		}
		if st := waitSettled(t, p); st.Published != uint64(len(seqs)) || st.Dropped != 0 {
			t.Errorf("stats %+v after %d batches", st, len(seqs))
		}
	})
	// While the publisher's goroutine is held up (here by the replay
	// buffer's lock, as by a slow encoding), a burst queues; it goes out
	// in batches as full as the bounds allow.
	for _, tc := range []struct {
		name   string
		tokens int // each event's
		full   int // events in a full batch
	}{
		{"by=events", 0, maxBatchEvents},
		{"by=bytes", 10000, maxBatchBytes / eventSize(new(numbered(0, 10000)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, func(c *Config) { c.ReplayEndpoint = "tcp://127.0.0.1:0" }, Options{})
			sub := dialPeer(t, p.PubAddr(), "SUB")
			sub.subscribe("")
			waitPrefixes(t, p, 1)
			n := uint64(3*tc.full + 1)
			p.ringMu.Lock()
			p.Emit(numbered(0, tc.tokens))
			waitTaken(t, p)
			for i := uint64(1); i < n; i++ {
				p.Emit(numbered(i, tc.tokens))
			}
			p.ringMu.Unlock()
			seqs, sizes := readEvents(t, sub, 0, n, p.batchBytes)
			if want := []int{1, tc.full, tc.full, tc.full}; !reflect.DeepEqual(sizes, want) || !consecutive(seqs, 0) {
				t.Errorf("batches %v of %v events, want %v", seqs, sizes, want)
			}
			if st := waitSettled(t, p); st.Published != 4 || st.Dropped != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// Past max_queue_size waiting calls, Emit and Publish drop and count,
// each dropped call taking a sequence number, so the gap shows; what was
// queued goes out, and so does what comes once the queue drains.
func TestEmitQueueBoundDropsAndCounts(t *testing.T) {
	const bound = 10
	p := start(t, func(c *Config) {
		c.MaxQueueSize = bound
		c.ReplayEndpoint = "tcp://127.0.0.1:0"
	}, Options{})
	sub := dialPeer(t, p.PubAddr(), "SUB")
	sub.subscribe("")
	waitPrefixes(t, p, 1)
	p.ringMu.Lock() // holds the publisher's goroutine at its first batch
	p.Emit(numbered(0, 0))
	waitTaken(t, p)
	for i := range uint64(bound) {
		p.Emit(numbered(1+i, 0)) // queued, one batch
	}
	for i := range uint64(5) {
		p.Emit(numbered(100+i, 0)) // dropped
	}
	p.Publish(sample()) // dropped
	st := p.Stats()
	p.ringMu.Unlock()
	if st.Sequenced != 2+6 || st.Dropped != 6 {
		t.Errorf("stats %+v while the queue was full: want 8 sequenced, 6 dropped", st)
	}
	seqs, sizes := readEvents(t, sub, 0, 1+bound, p.batchBytes)
	if !reflect.DeepEqual(seqs, []uint64{0, 1}) || !reflect.DeepEqual(sizes, []int{1, bound}) {
		t.Errorf("batches %v of %v events, want [0 1] of [1 %d]", seqs, sizes, bound)
	}
	waitSettled(t, p)
	// The queue has drained: the next event goes out after the gap.
	p.Emit(numbered(1+bound, 0))
	if seqs, _ := readEvents(t, sub, 1+bound, 2+bound, p.batchBytes); !reflect.DeepEqual(seqs, []uint64{8}) {
		t.Errorf("batch %v after the drops, want [8]", seqs)
	}
	if st := waitSettled(t, p); st.Published != 3 || st.Dropped != 6 || st.Sequenced != 9 {
		t.Errorf("stats %+v: want 3 published, 6 dropped of 9", st)
	}
}

// eventSize is at least what an event encodes to, so a batch's estimate
// bounds its payload.
func TestEventSizeBounds(t *testing.T) {
	events := append(sample(), realisticBatch()...)
	events = append(events, numbered(1<<63, 10000))
	for _, enc := range []Encoding{Maps, Arrays} {
		empty, err := encodeBatch(0, nil, 0, enc)
		if err != nil {
			t.Fatal(err)
		}
		for i := range events {
			b, err := encodeBatch(0, events[i:i+1], 0, enc)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(b) - len(empty); got > eventSize(&events[i]) {
				t.Errorf("%v: event %d encodes to %d bytes, estimated %d", enc, i, got, eventSize(&events[i]))
			}
		}
	}
}

// Events emitted apart in time share a batch while the first waits out
// Gather; Flush, Close and a full batch's worth of calls send it at
// once; a negative Gather sends each as it comes.
func TestGather(t *testing.T) {
	subscribed := func(t *testing.T, gather time.Duration) (*Publisher, *peer) {
		p := start(t, nil, Options{Gather: gather})
		sub := dialPeer(t, p.PubAddr(), "SUB")
		sub.subscribe("")
		waitPrefixes(t, p, 1)
		return p, sub
	}
	t.Run("gathered", func(t *testing.T) {
		p, sub := subscribed(t, 300*time.Millisecond)
		p.Emit(numbered(0, 0))
		time.Sleep(50 * time.Millisecond)
		p.Emit(numbered(1, 0))
		if seqs, sizes := readEvents(t, sub, 0, 2, p.batchBytes); !reflect.DeepEqual(sizes, []int{2}) {
			t.Errorf("batches %v of %v events, want one of 2", seqs, sizes)
		}
	})
	t.Run("flush", func(t *testing.T) {
		p, sub := subscribed(t, time.Hour)
		p.Emit(numbered(0, 0))
		if !sub.quiet(100 * time.Millisecond) {
			t.Fatal("a batch went out before Gather or Flush")
		}
		p.Flush()
		readEvents(t, sub, 0, 1, p.batchBytes)
		p.Emit(numbered(1, 0)) // waits out Gather again
		if !sub.quiet(100 * time.Millisecond) {
			t.Fatal("an event emitted after Flush went out without waiting")
		}
		begin := time.Now()
		p.Close()
		readEvents(t, sub, 1, 2, p.batchBytes)
		if d := time.Since(begin); d > 30*time.Second {
			t.Errorf("Close took %v", d)
		}
	})
	t.Run("enough", func(t *testing.T) {
		p, sub := subscribed(t, time.Hour)
		for i := range uint64(gatherEnough - 1) {
			p.Emit(numbered(i, 0))
		}
		if !sub.quiet(100 * time.Millisecond) {
			t.Fatal("a batch went out before Gather or a full batch's worth")
		}
		p.Emit(numbered(gatherEnough-1, 0))
		readEvents(t, sub, 0, gatherEnough, p.batchBytes)
	})
	// A max_queue_size under twice gatherEnough ends the wait at half the
	// queue, so that waiting drops nothing.
	t.Run("small queue", func(t *testing.T) {
		p := start(t, func(c *Config) { c.MaxQueueSize = 10 }, Options{Gather: time.Hour})
		sub := dialPeer(t, p.PubAddr(), "SUB")
		sub.subscribe("")
		waitPrefixes(t, p, 1)
		for round := range uint64(3) {
			for i := range uint64(5) {
				p.Emit(numbered(5*round+i, 0))
			}
			readEvents(t, sub, 5*round, 5*round+5, p.batchBytes)
		}
		if st := waitSettled(t, p); st.Dropped != 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("at once", func(t *testing.T) {
		p, sub := subscribed(t, -1)
		for i := range uint64(3) {
			p.Emit(numbered(i, 0))
			waitSettled(t, p)
		}
		if seqs, sizes := readEvents(t, sub, 0, 3, p.batchBytes); !reflect.DeepEqual(sizes, []int{1, 1, 1}) {
			t.Errorf("batches %v of %v events, want three of one", seqs, sizes)
		}
	})
}
