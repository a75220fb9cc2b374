package redis_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// benchLayers is the number of layers a request saves and loads.
const benchLayers = 32

// BenchmarkSaveLoad compares the connector with its floor on one real
// redis-server: a request saves benchLayers layers and waits for the save,
// then loads them all back. The floor does the same work with go-redis
// alone, a pipeline of SETs then a pipeline of GETs of the same values,
// with no header, checksum or marker. Each iteration runs both, in
// alternating order so they share the machine's state, and reports the
// connector's time (conn-s/op), the floor's (floor-s/op) and the ratio of
// their speeds (floor time over connector time; 1 is as fast as the
// floor; the median over the pairs). requests=8 runs eight requests at once on the same connector and
// on the same floor client.
func BenchmarkSaveLoad(b *testing.B) {
	srv := startRedis(b)
	for _, size := range []struct {
		name  string
		bytes int
	}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}} {
		for _, par := range []int{1, 8} {
			b.Run(fmt.Sprintf("layer=%s/requests=%d", size.name, par), func(b *testing.B) {
				benchSaveLoad(b, srv.Addr(), size.bytes, par)
			})
		}
	}
}

func benchSaveLoad(b *testing.B, addr string, size, par int) {
	layers := make([]string, benchLayers)
	kvs := make([][]byte, benchLayers)
	for i := range layers {
		layers[i] = fmt.Sprintf("model.layers.%d.self_attn", i)
		kvs[i] = make([]byte, size)
		for j := range kvs[i] {
			kvs[i][j] = byte(i + j)
		}
	}
	// Eight requests of 32 16 MiB layers keep a single-threaded server
	// busy for tens of seconds, a write waiting its turn behind the others
	// for longer than the default 3s timeouts; both get the same.
	cfg := config("bench", map[string]any{"addrs": []string{addr}, "read_timeout": "60s", "write_timeout": "60s"}, layers...)
	w := openWorker(b, cfg)
	floor := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	b.Cleanup(func() { _ = floor.Close() })
	ctx := b.Context()
	reqs := make([]*kv.Request, par)
	for i := range reqs {
		reqs[i] = request(fmt.Sprint("r", i), uint32(i+1), 2*blockSize)
	}

	// Both check what they load the same cheap way, so the work is not
	// dropped and a broken variant fails rather than looks fast.
	check := func(i int, kvData []byte) error {
		if len(kvData) != size || kvData[size-1] != kvs[i][size-1] {
			return fmt.Errorf("layer %d: loaded %d bytes, not what was saved", i, len(kvData))
		}
		return nil
	}
	conn := func(req *kv.Request) error {
		for i, l := range layers {
			if err := w.SaveLayer(ctx, req, l, 2*blockSize, kvs[i]); err != nil {
				return err
			}
		}
		if err := w.WaitForSave(ctx); err != nil {
			return err
		}
		for i, l := range layers {
			kvData, err := w.LoadLayer(ctx, req, l, 2*blockSize)
			if err != nil {
				return err
			}
			if err := check(i, kvData); err != nil {
				return err
			}
		}
		_, _, err := w.Finished(ctx, []string{req.ID})
		return err
	}
	flr := func(req *kv.Request) error {
		if _, err := floor.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, l := range layers {
				p.Set(ctx, "floor:"+req.ID+":"+l, kvs[i], 0)
			}
			return nil
		}); err != nil {
			return err
		}
		gets := make([]*goredis.StringCmd, len(layers))
		if _, err := floor.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, l := range layers {
				gets[i] = p.Get(ctx, "floor:"+req.ID+":"+l)
			}
			return nil
		}); err != nil {
			return err
		}
		for i, g := range gets {
			kvData, err := g.Bytes()
			if err != nil {
				return err
			}
			if err := check(i, kvData); err != nil {
				return err
			}
		}
		return nil
	}
	// run times one pass of f over every request at once, then empties the
	// server untimed so that memory stays bounded at 16 MiB layers.
	run := func(f func(*kv.Request) error) time.Duration {
		errs := make([]error, len(reqs))
		start := time.Now()
		var wg sync.WaitGroup
		for i, req := range reqs {
			wg.Go(func() { errs[i] = f(req) })
		}
		wg.Wait()
		d := time.Since(start)
		for _, err := range errs {
			require.NoError(b, err)
		}
		b.StopTimer()
		require.NoError(b, floor.FlushAll(context.Background()).Err())
		b.StartTimer()
		return d
	}
	run(conn) // warm both pools
	run(flr)
	b.SetBytes(int64(2 * par * benchLayers * size))
	var connTime, floorTime time.Duration
	ratios := make([]float64, b.N)
	b.ResetTimer()
	for i := range b.N {
		var c, f time.Duration
		if i%2 == 0 {
			c = run(conn)
			f = run(flr)
		} else {
			f = run(flr)
			c = run(conn)
		}
		connTime += c
		floorTime += f
		ratios[i] = f.Seconds() / c.Seconds()
	}
	b.ReportMetric(connTime.Seconds()/float64(b.N), "conn-s/op")
	b.ReportMetric(floorTime.Seconds()/float64(b.N), "floor-s/op")
	// The median of each pair's ratio: a pair ran back to back, so it
	// shares the machine's load, which a ratio of totals would not undo
	// when the load changes between pairs.
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
}
