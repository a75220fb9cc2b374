package kvevents

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvgen/kvgen/examples/connectors/memory"
	"github.com/kvgen/kvgen/registry/kv"
	"github.com/vmihailenco/msgpack/v5"
)

// realisticBatch is what a connector reports for one saved prompt of 256
// tokens and one evicted: a BlockStored of 16 blocks of 16 tokens chained
// to a parent block, and a BlockRemoved of 16 blocks, every hash a
// full-width uint64.
func realisticBatch() []kv.KVEvent {
	rng := rand.New(rand.NewPCG(3, 4))
	hashes := func() []kv.BlockHash {
		h := make([]kv.BlockHash, 16)
		for i := range h {
			h[i] = hash(rng.Uint64() | 1<<63)
		}
		return h
	}
	tokens := make([]uint32, 16*16)
	for i := range tokens {
		tokens[i] = rng.Uint32N(1 << 17)
	}
	parent := hash(rng.Uint64() | 1<<63)
	return []kv.KVEvent{
		{Kind: kv.BlockStored, BlockHashes: hashes(), ParentBlockHash: &parent,
			TokenIDs: tokens, BlockSize: 16, Medium: kv.MediumCPU},
		{Kind: kv.BlockRemoved, BlockHashes: hashes(), Medium: kv.MediumCPU},
	}
}

// counter reads one subscriber's messages until its connection ends,
// checking that each is the next batch, of the length every batch has.
type counter struct {
	p        *peer
	size     int // each payload's length, or -1 for any
	keep     bool
	got      atomic.Uint64
	bytes    int
	payloads [][]byte // with keep, each payload read, to decode once done
	err      error
	done     chan struct{}
	progress chan<- struct{}
}

func newCounter(p *peer, size int, progress chan<- struct{}) *counter {
	return startCounter(&counter{p: p, size: size, progress: progress})
}

func startCounter(c *counter) *counter {
	c.done = make(chan struct{})
	go c.run()
	return c
}

func (c *counter) run() {
	defer close(c.done)
	for {
		m, err := c.p.msgErr(time.Minute)
		if err != nil {
			c.err = err
			return
		}
		if want := c.got.Load(); len(m) != 3 || len(m[1]) != 8 || binary.BigEndian.Uint64(m[1]) != want || (c.size >= 0 && len(m[2]) != c.size) {
			c.err = fmt.Errorf("message %q, want batch %d of %d bytes", m, want, c.size)
			return
		}
		c.bytes += len(m[2])
		if c.keep {
			c.payloads = append(c.payloads, m[2])
		}
		c.got.Add(1)
		select {
		case c.progress <- struct{}{}:
		default:
		}
	}
}

// subscribers connects n subscribers to everything p publishes, each
// read by a counter.
func subscribers(t testing.TB, p *Publisher, n, size int, progress chan<- struct{}) []*counter {
	var cs []*counter
	for range n {
		sub := dialPeer(t, p.PubAddr(), "SUB")
		sub.subscribe("")
		cs = append(cs, newCounter(sub, size, progress))
	}
	return cs
}

// least returns the fewest batches a counter has read.
func least(cs []*counter) uint64 {
	n := uint64(1<<64 - 1)
	for _, c := range cs {
		n = min(n, c.got.Load())
	}
	return n
}

// waitRead waits until every counter has read n batches, or d passes.
func waitRead(cs []*counter, n uint64, progress <-chan struct{}, d time.Duration) bool {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for least(cs) < n {
		select {
		case <-progress:
		case <-timeout.C:
			return least(cs) >= n
		}
	}
	return true
}

// BenchmarkPublish measures the batches per second one publisher
// sustains to 0, 1 and 10 subscribers reading over TCP loopback as fast
// as they can. Each batch is realisticBatch. Publishing runs at most
// window batches ahead of the slowest subscriber (of the encoder, with
// none), so that no queue overflows and every batch counted is delivered;
// the time runs until the last subscriber has read the last batch.
func BenchmarkPublish(b *testing.B) {
	events := realisticBatch()
	payload, err := encodeBatch(0, events, 0, Maps)
	if err != nil {
		b.Fatal(err)
	}
	const window = 1024
	for _, n := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			p := start(b, nil, Options{})
			progress := make(chan struct{}, 1)
			cs := subscribers(b, p, n, len(payload), progress)
			waitPrefixes(b, p, n)
			done := func() uint64 {
				if n == 0 {
					return p.published.Load()
				}
				return least(cs)
			}
			b.SetBytes(int64(len(payload)))
			b.ResetTimer()
			begin := time.Now()
			for i := range b.N {
				if i%64 == 0 {
					for uint64(i)-min(uint64(i), done()) > window {
						if n == 0 {
							time.Sleep(100 * time.Microsecond) // a window's encoding takes longer
						} else {
							<-progress
						}
					}
				}
				p.Publish(events)
			}
			if n == 0 {
				for p.published.Load() < uint64(b.N) {
					time.Sleep(20 * time.Microsecond)
				}
			} else if !waitRead(cs, uint64(b.N), progress, time.Minute) {
				b.Fatalf("subscribers read %d of %d batches", least(cs), b.N)
			}
			elapsed := time.Since(begin)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "batches/s")
			p.Close()
			st := p.Stats()
			if st.Published != uint64(b.N) || st.Dropped != 0 || st.SubscriberDrops != 0 {
				b.Fatalf("stats %+v after %d batches", st, b.N)
			}
			for _, c := range cs {
				<-c.done
				if c.got.Load() != uint64(b.N) || c.bytes != b.N*len(payload) {
					b.Fatalf("a subscriber read %d batches, %d bytes, of %d: %v", c.got.Load(), c.bytes, b.N, c.err)
				}
			}
		})
	}
}

// BenchmarkSaveWithEvents measures what publishing costs a save-heavy
// run: the memory connector saves requests of 32 layers of 64 KiB (256
// tokens in blocks of 16) into a store that holds four, so that every
// request stores a prefix and evicts one. Three connectors, each with a
// store of its own, take turns in every iteration, 64 requests each, the
// first of them changing from one iteration to the next, so that the
// three ways see the same machine: events off; events on and counted by
// the host, which is what the connector's own reporting costs; and events
// on and published through a Publisher to one subscriber, which reads
// and decodes every batch in a process of its own, as a router does
// (runReader). The published turn is a step: it ends with Flush, and
// when the subscriber has read every batch it made, so the publisher's
// goroutine and its writer, which run beside the saves, are within it,
// and the ways do not share each other's work. That wait at the turn's
// end is reported too (wait-µs/req): it is a handful of wake-ups across
// two processes, and a turn of 64 requests keeps it near 1% of the turn.
// Publishing's cost is published/counted, in time;
// cpu-published/counted is the same in processor time, user and system,
// of the host's process alone. savers=1 saves from one goroutine, which
// leaves the publisher a core the saves do not use; savers=GOMAXPROCS
// saves from as many, and so measures a host whose cores the saves keep
// busy. Compare runs with benchstat (README.md, "Speed").
func BenchmarkSaveWithEvents(b *testing.B) {
	for _, savers := range slices.Compact([]int{1, runtime.GOMAXPROCS(0)}) {
		b.Run(fmt.Sprintf("savers=%d", savers), func(b *testing.B) { saveWithEvents(b, savers) })
	}
}

func saveWithEvents(b *testing.B, savers int) {
	const layers, layerBytes, promptTokens, turn = 32, 64 << 10, 256, 64
	names := make([]string, layers)
	for i := range names {
		names[i] = fmt.Sprintf("model.layers.%d.self_attn", i)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	reqs := make([]*kv.Request, 3*turn)
	for i := range reqs {
		tokens := make([]uint32, promptTokens)
		for j := range tokens {
			tokens[j] = rng.Uint32N(1 << 17)
		}
		reqs[i] = &kv.Request{ID: fmt.Sprintf("req-%d", i), PromptTokens: tokens}
	}
	kvData := make([]byte, layerBytes)
	for i := range kvData {
		kvData[i] = byte(rng.Uint32())
	}
	ctx := context.Background()
	type way struct {
		name    string
		w       kv.Worker
		emitted atomic.Int64 // the connector reports from the saving goroutines
		p       *Publisher
		reader  *readerProcess
		took    time.Duration
		cpu     time.Duration
	}
	ways := []*way{{name: "off"}, {name: "counted"}, {name: "published"}}
	for _, w := range ways {
		c, err := memory.New(ctx, kv.Config{BlockSize: 16, LayerNames: names, Extra: map[string]any{
			"store":          b.Name() + "/" + w.name,
			"capacity_bytes": 4 * layers * (layerBytes + 1024),
		}}, kv.RoleWorker)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		w.w = c.(kv.Worker)
		switch w.name {
		case "counted":
			c.(kv.EventReporter).ReportEvents(func(kv.KVEvent) { w.emitted.Add(1) })
		case "published":
			w.p = start(b, nil, Options{})
			w.reader = startReader(b, w.p.PubAddr())
			waitPrefixes(b, w.p, 1)
			c.(kv.EventReporter).ReportEvents(func(e kv.KVEvent) {
				w.emitted.Add(1)
				w.p.Emit(e)
			})
		}
	}
	b.ReportAllocs()
	i := 0                 // requests each way saved
	var wait time.Duration // the published turns' ends
	// Each round takes the ways in the next of the six orders, so that
	// each way follows each other as often: taken in turn, a way ran
	// after the same one every time, and the positions alone moved the
	// ratios by several percent.
	orders := [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for round := 0; b.Loop(); round++ {
		for _, k := range orders[round%len(orders)] {
			w := ways[k]
			begin, cpuBegin := time.Now(), processCPU(b)
			var wg sync.WaitGroup
			errs := make([]error, savers)
			for s := range savers {
				wg.Go(func() {
					for r := s; r < turn && errs[s] == nil; r += savers {
						req := reqs[(i+r)%len(reqs)]
						for _, l := range names {
							if err := w.w.SaveLayer(ctx, req, l, promptTokens, kvData); err != nil {
								errs[s] = err
								break
							}
						}
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
			if w.p != nil {
				end := time.Now()
				w.p.Flush() // the turn is a step
				if got := w.reader.ask(b, strconv.FormatUint(w.p.Stats().Sequenced, 10)); got != "ok" {
					b.Fatalf("the subscriber: %s", got)
				}
				wait += time.Since(end)
			}
			w.took += time.Since(begin)
			w.cpu += processCPU(b) - cpuBegin
		}
		i += turn
	}
	perRequest := map[string]float64{}
	for _, w := range ways {
		perRequest[w.name] = float64(w.took.Nanoseconds()) / float64(i)
		b.ReportMetric(perRequest[w.name]/1e3, w.name+"-µs/req")
		if w.name != "off" && w.emitted.Load() < int64(i) {
			b.Fatalf("%s: %d events after %d requests", w.name, w.emitted.Load(), i)
		}
	}
	b.ReportMetric(perRequest["published"]/perRequest["counted"], "published/counted")
	if ways[1].cpu > 0 {
		b.ReportMetric(float64(ways[2].cpu)/float64(ways[1].cpu), "cpu-published/counted")
	}
	b.ReportMetric(perRequest["counted"]/perRequest["off"], "counted/off")
	b.ReportMetric(float64(wait.Nanoseconds())/float64(i)/1e3, "wait-µs/req")

	pub := ways[2]
	if st := pub.p.Stats(); st.Dropped != 0 || st.SubscriberDrops != 0 {
		b.Fatalf("stats %+v after %d requests, %d events", st, i, pub.emitted.Load())
	}
	if got, want := pub.reader.ask(b, "events"), strconv.FormatInt(pub.emitted.Load(), 10); got != want {
		b.Fatalf("the subscriber read %s events of %s", got, want)
	}
	b.ReportMetric(float64(pub.p.Stats().Sequenced)/float64(i), "batches/req")
}

// readerEnv, set to a publisher's address, makes the test binary the
// benchmark's subscriber (runReader) instead of running tests: a router
// reads a host's events in a process of its own, so the processor time
// BenchmarkSaveWithEvents counts is the host's alone.
const readerEnv = "KVEVENTS_BENCH_READER"

// runReader subscribes to everything the publisher at addr sends and
// reads it as counter does. To each line on standard input it answers a
// line: to a number N, "ok" once N batches are read; to "events", how
// many events the batches read hold. It returns the exit status.
func runReader(addr string) int {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		p := &peer{c: c, r: bufio.NewReaderSize(c, 64<<10)}
		if err = p.handshake("SUB"); err == nil {
			err = p.writeErr(command("SUBSCRIBE", ""))
		}
		if err == nil {
			err = answer(p, os.Stdin, os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kv events reader:", err)
		return 1
	}
	return 0
}

func answer(p *peer, in io.Reader, out io.Writer) error {
	progress := make(chan struct{}, 1)
	r := startCounter(&counter{p: p, size: -1, keep: true, progress: progress})
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		reply := "ok"
		if lines.Text() == "events" {
			n, err := countEvents(r.payloads)
			if err != nil {
				return err
			}
			reply = strconv.Itoa(n)
		} else if n, err := strconv.ParseUint(lines.Text(), 10, 64); err != nil {
			return err
		} else if !waitRead([]*counter{r}, n, progress, time.Minute) {
			reply = fmt.Sprintf("read %d of %d batches", r.got.Load(), n)
			select {
			case <-r.done:
				reply += ": " + r.err.Error()
			default:
			}
		}
		if _, err := fmt.Fprintln(out, reply); err != nil {
			return err
		}
	}
	return lines.Err()
}

// countEvents decodes each payload as a batch and counts its events.
func countEvents(payloads [][]byte) (int, error) {
	n := 0
	for _, m := range payloads {
		var batch []msgpack.RawMessage
		var events []msgpack.RawMessage
		if err := msgpack.Unmarshal(m, &batch); err != nil || len(batch) != 3 {
			return 0, fmt.Errorf("batch %x: %v", m, err)
		}
		if err := msgpack.Unmarshal(batch[1], &events); err != nil {
			return 0, err
		}
		n += len(events)
	}
	return n, nil
}

// readerProcess is runReader in a process of its own.
type readerProcess struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

func startReader(b *testing.B, addr net.Addr) *readerProcess {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), readerEnv+"="+addr.String())
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("the reader process: %v", err)
		}
	})
	return &readerProcess{in: in, out: bufio.NewScanner(out)}
}

// ask writes q to the reader and returns its answer.
func (r *readerProcess) ask(b *testing.B, q string) string {
	if _, err := fmt.Fprintln(r.in, q); err != nil {
		b.Fatal(err)
	}
	if !r.out.Scan() {
		b.Fatalf("the reader process ended: %v", r.out.Err())
	}
	return r.out.Text()
}
