// Package kvbench is the workload the reference connectors' benchmarks
// share: requests of 32 layers at 64 KiB, 1 MiB and 16 MiB a layer, one
// request at a time or 8 at once, each saved and then loaded whole, by a
// connector and by its floor in turn.
package kvbench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// Layers is the number of layers of a request.
const Layers = 32

// BlockSize and PromptTokens shape each request's prompt; every layer is
// saved for the whole prompt.
const (
	BlockSize    = 16
	PromptTokens = 256
)

// Size is a layer size to benchmark.
type Size struct {
	// Name labels the size in benchmark names, e.g. "1MiB".
	Name string
	// Bytes is a layer's size.
	Bytes int
}

// Sizes are the layer sizes benchmarked.
var Sizes = []Size{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}}

// Concurrency is the number of requests in flight at once: 1, and 8 for
// the parallel variants.
var Concurrency = []int{1, 8}

// LayerNames returns the names of a request's layers, as vLLM names them.
func LayerNames() []string {
	names := make([]string, Layers)
	for i := range names {
		names[i] = fmt.Sprintf("model.layers.%d.self_attn", i)
	}
	return names
}

// Requests returns n requests with distinct prompts.
func Requests(n int) []*kv.Request {
	rng := rand.New(rand.NewPCG(1, 2))
	reqs := make([]*kv.Request, n)
	for i := range reqs {
		tokens := make([]uint32, PromptTokens)
		for j := range tokens {
			tokens[j] = rng.Uint32N(1 << 17)
		}
		reqs[i] = &kv.Request{ID: fmt.Sprintf("req-%d", i), PromptTokens: tokens}
	}
	return reqs
}

// Payload returns size random bytes: the KV of one layer.
func Payload(size int) []byte {
	b := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(b) // never fails
	return b
}

// Sink keeps what a benchmark loaded reachable, so the compiler cannot
// drop the work that produced it.
var Sink struct {
	sync.Mutex
	// Bytes adds up the bytes of every layer used.
	Bytes int
}

// Use records kv in Sink.
func Use(kvData []byte) {
	Sink.Lock()
	Sink.Bytes += len(kvData)
	if len(kvData) > 0 {
		Sink.Bytes += int(kvData[len(kvData)-1])
	}
	Sink.Unlock()
}

// Case is one size and concurrency of the workload.
type Case struct {
	// Name is "size=S/requests=N", the start of a sub-benchmark's name.
	Name string
	// Bytes is the size of a layer, KV the bytes of every layer saved.
	Bytes int
	KV    []byte
	// Requests are the requests in flight at once.
	Requests []*kv.Request
}

// Cases returns every size at every concurrency.
func Cases() []Case {
	payload := Payload(Sizes[len(Sizes)-1].Bytes)
	var cases []Case
	for _, size := range Sizes {
		for _, n := range Concurrency {
			cases = append(cases, Case{
				Name:     fmt.Sprintf("size=%s/requests=%d", size.Name, n),
				Bytes:    size.Bytes,
				KV:       payload[:size.Bytes],
				Requests: Requests(n),
			})
		}
	}
	return cases
}

// Side is one way of doing the workload: the floor, or a connector.
type Side struct {
	// Name labels the side in reported metrics.
	Name string
	// Start prepares a round, outside the timing. It returns what request
	// i of the round does, and what ends the round (also untimed).
	Start func() (do func(i int) error, stop func())
}

// Pair runs every side once per iteration, one after the other, each
// timed on its own after a garbage collection, so that the machine's load
// and the heap left by the others weigh on all of them alike; the side
// that goes first changes from one iteration to the next. It reports
// each side's throughput (bytes saved and loaded) as "NAME-MB/s", each
// later side's throughput over the first's as "NAME/FIRST", and the same
// ratio of the processor time the process used (on every thread, in user
// and kernel mode) as "NAME/FIRST-cpu". On a machine whose cores other
// work contends for, the wall-clock ratio varies with that work; the
// processor-time ratio does not count the time spent waiting for a core,
// but neither does it count waiting for a disk.
func Pair(b *testing.B, c Case, sides ...Side) {
	n := len(c.Requests)
	elapsed := make([]time.Duration, len(sides))
	cpu := make([]time.Duration, len(sides))
	errs := make([]error, n)
	b.ReportAllocs()
	round := 0
	for b.Loop() {
		for k := range sides {
			s := (round + k) % len(sides)
			side := sides[s]
			do, stop := side.Start()
			runtime.GC()
			start, startCPU := time.Now(), cpuTime()
			if n == 1 {
				errs[0] = do(0)
			} else {
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() { errs[i] = do(i) })
				}
				wg.Wait()
			}
			elapsed[s] += time.Since(start)
			cpu[s] += cpuTime() - startCPU
			stop()
			if err := errors.Join(errs...); err != nil {
				b.Fatalf("%s: %v", side.Name, err)
			}
		}
		round++
	}
	bytes := float64(2*Layers*c.Bytes*n) * float64(b.N)
	for s, side := range sides {
		b.ReportMetric(bytes/1e6/elapsed[s].Seconds(), side.Name+"-MB/s")
		if s > 0 {
			b.ReportMetric(elapsed[0].Seconds()/elapsed[s].Seconds(), side.Name+"/"+sides[0].Name)
			if cpu[s] > 0 {
				b.ReportMetric(cpu[0].Seconds()/cpu[s].Seconds(), side.Name+"/"+sides[0].Name+"-cpu")
			}
		}
	}
}

// WorkerSides are the sides of a connector: "connector" loads with
// LoadLayer, "append" with kv.AppendLayer into a buffer per request
// that it reuses from round to round. start opens the worker for a round,
// stop ends the round.
func WorkerSides(c Case, start func() kv.Worker, stop func(kv.Worker)) []Side {
	var sides []Side
	for _, name := range []string{"connector", "append"} {
		bufs := make([][]byte, len(c.Requests))
		sides = append(sides, Side{Name: name, Start: func() (func(int) error, func()) {
			w := start()
			return func(i int) error { return saveLoad(c, w, i, name == "append", bufs) }, func() { stop(w) }
		}})
	}
	return sides
}

// saveLoad saves every layer of request i through w and loads it back.
func saveLoad(c Case, w kv.Worker, i int, appending bool, bufs [][]byte) error {
	ctx := context.Background()
	req := c.Requests[i]
	names := LayerNames()
	for _, l := range names {
		if err := w.SaveLayer(ctx, req, l, PromptTokens, c.KV); err != nil {
			return err
		}
	}
	for _, l := range names {
		var got []byte
		var err error
		if appending {
			got, err = kv.AppendLayer(ctx, w, req, l, PromptTokens, bufs[i][:0])
			bufs[i] = got
		} else {
			got, err = w.LoadLayer(ctx, req, l, PromptTokens)
		}
		if err != nil {
			return err
		}
		Use(got)
	}
	return nil
}
