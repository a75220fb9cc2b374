package kv

import (
	"errors"
	"maps"
	"sync/atomic"
	"time"
)

// StatsReporter is implemented by connectors that count their transfers,
// as vLLM's connectors do through get_kv_connector_stats. A host exports
// the counts (kvserver's serve mode as Prometheus metrics); a connector that
// does not implement it is simply not counted.
type StatsReporter interface {
	// KVStats returns what the connector counted since KVStats was first
	// called. The first call returns zero counts and starts the counting,
	// so that a connector whose stats nobody reads spends nothing on them.
	KVStats() Stats
}

// ErrorKind classifies the failures [Stats] counts.
type ErrorKind uint8

// The kinds of failure a connector counts. A load of KV that is not
// stored is a miss, not an error.
const (
	// ErrorLoad is a load that failed for another reason than absence: an
	// I/O or network error, a closed connector.
	ErrorLoad ErrorKind = iota
	// ErrorSave is a save that failed.
	ErrorSave
	// ErrorCorrupt is stored KV that failed its integrity check; the load
	// is also counted as a miss.
	ErrorCorrupt

	// NumErrorKinds is the number of error kinds.
	NumErrorKinds
)

var errorKindNames = [NumErrorKinds]string{"load", "save", "corrupt"}

// String returns the kind's name, as exported in a metric's label.
func (k ErrorKind) String() string {
	if k < NumErrorKinds {
		return errorKindNames[k]
	}
	return "unknown"
}

// latencyBounds are the upper bounds of the latency histograms' buckets:
// from a copy in memory to a slow network store.
var latencyBounds = [...]time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// LatencyBounds returns the upper bounds of the buckets of every
// [Histogram], in increasing order. It is a new slice each time.
func LatencyBounds() []time.Duration { return append([]time.Duration(nil), latencyBounds[:]...) }

// Histogram counts latencies in the buckets [LatencyBounds] gives. It is a
// value with fixed buckets, so that histograms of any connectors merge.
type Histogram struct {
	// Counts[i] counts the latencies above LatencyBounds()[i-1] and at most
	// LatencyBounds()[i]; the last element counts those above every bound.
	Counts [len(latencyBounds) + 1]uint64
	// Sum is the sum of the latencies counted.
	Sum time.Duration
}

// Count returns the number of latencies counted.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

func (h *Histogram) merge(o Histogram) {
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.Sum += o.Sum
}

// Stats is what a connector counted: vLLM's KVConnectorStats for kvgen's
// connectors. Stats of several connectors, or of several intervals, add up
// with [Stats.Merge]; a MultiConnector reports each child's under
// Children, and [Stats.Total] folds them into one record. The zero value
// is an empty record.
type Stats struct {
	// Hits counts layer loads that returned KV, Misses those that found
	// none: not stored, evicted, or failing its integrity check.
	Hits, Misses uint64
	// BytesLoaded and BytesSaved count the KV bytes of the layers loaded
	// and saved.
	BytesLoaded, BytesSaved uint64
	// LoadLatency times every layer load, hit or miss; SaveLatency every
	// layer save that succeeded, until its KV is stored.
	LoadLatency, SaveLatency Histogram
	// Errors counts failures by [ErrorKind].
	Errors [NumErrorKinds]uint64
	// Children holds the stats of a composite connector's children, by a
	// label unique among them (the child's connector name, with "#2",
	// "#3"... for a name listed again).
	Children map[string]Stats
}

// Merge adds o's counts to s, child by child where both have children.
func (s *Stats) Merge(o Stats) {
	s.Hits += o.Hits
	s.Misses += o.Misses
	s.BytesLoaded += o.BytesLoaded
	s.BytesSaved += o.BytesSaved
	s.LoadLatency.merge(o.LoadLatency)
	s.SaveLatency.merge(o.SaveLatency)
	for k, n := range o.Errors {
		s.Errors[k] += n
	}
	if len(o.Children) > 0 && s.Children == nil {
		s.Children = make(map[string]Stats, len(o.Children))
	}
	for label, c := range o.Children {
		mine := s.Children[label]
		mine.Merge(c)
		s.Children[label] = mine
	}
}

// Total returns s with every child's counts, and their children's, added
// to its own, and no children: vLLM's reduce.
func (s Stats) Total() Stats {
	t := s
	t.Children = nil
	for _, c := range s.Children {
		t.Merge(c.Total())
	}
	return t
}

// Clone returns a copy of s that shares no map with it.
func (s Stats) Clone() Stats {
	c := s
	if s.Children != nil {
		c.Children = maps.Clone(s.Children)
		for label, child := range c.Children {
			c.Children[label] = child.Clone()
		}
	}
	return c
}

// StatsRecorder counts a connector's work for [StatsReporter]: a connector
// keeps one, calls its methods on the data path and returns
// [StatsRecorder.Stats] from KVStats. It counts nothing until Stats is
// first called, and then only with atomic adds, so that it neither
// allocates nor locks. The zero value is ready to use; it must not be
// copied after first use.
type StatsRecorder struct {
	on                      atomic.Bool
	hits, misses            atomic.Uint64
	bytesLoaded, bytesSaved atomic.Uint64
	loadLatency             histogramRecorder
	saveLatency             histogramRecorder
	errors                  [NumErrorKinds]atomic.Uint64
}

type histogramRecorder struct {
	counts [len(latencyBounds) + 1]atomic.Uint64
	sum    atomic.Int64
}

func (h *histogramRecorder) observe(d time.Duration) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

func (h *histogramRecorder) snapshot() Histogram {
	var s Histogram
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	s.Sum = time.Duration(h.sum.Load())
	return s
}

// Start returns the time an operation starts, to hand to Loaded, Missed or
// Saved when it ends; the zero time while nobody reads the stats, which
// spares reading the clock.
func (r *StatsRecorder) Start() time.Time {
	if !r.on.Load() {
		return time.Time{}
	}
	return time.Now()
}

// Loaded counts a load, begun at start, that returned n bytes of KV.
func (r *StatsRecorder) Loaded(start time.Time, n int) {
	if start.IsZero() {
		return
	}
	r.hits.Add(1)
	r.bytesLoaded.Add(uint64(n))
	r.loadLatency.observe(time.Since(start))
}

// Missed counts a load, begun at start, that found no KV.
func (r *StatsRecorder) Missed(start time.Time) {
	if start.IsZero() {
		return
	}
	r.misses.Add(1)
	r.loadLatency.observe(time.Since(start))
}

// Saved counts a save, begun at start, that stored n bytes of KV.
func (r *StatsRecorder) Saved(start time.Time, n int) {
	if start.IsZero() {
		return
	}
	r.bytesSaved.Add(uint64(n))
	r.saveLatency.observe(time.Since(start))
}

// Failed counts a failure of kind k.
func (r *StatsRecorder) Failed(k ErrorKind) {
	if k < NumErrorKinds && r.on.Load() {
		r.errors[k].Add(1)
	}
}

// Stats returns the counts so far, and starts counting on its first call.
// The counts are read one by one while the data path may add to them, so
// a snapshot taken during a load may count its hit but not yet its bytes;
// each count only grows.
func (r *StatsRecorder) Stats() Stats {
	r.on.Store(true)
	s := Stats{
		Hits:        r.hits.Load(),
		Misses:      r.misses.Load(),
		BytesLoaded: r.bytesLoaded.Load(),
		BytesSaved:  r.bytesSaved.Load(),
		LoadLatency: r.loadLatency.snapshot(),
		SaveLatency: r.saveLatency.snapshot(),
	}
	for k := range s.Errors {
		s.Errors[k] = r.errors[k].Load()
	}
	return s
}

// LoadDone counts a load, begun at start, that returned n bytes of KV or
// failed with err, as LoadLayer's errors say: a [LoadError] is stored KV
// that failed (a miss and ErrorCorrupt), another miss is a miss, and any
// other error is ErrorLoad.
func (r *StatsRecorder) LoadDone(start time.Time, n int, err error) {
	if err == nil {
		r.Loaded(start, n)
		return
	}
	if _, ok := errors.AsType[*LoadError](err); ok {
		r.Failed(ErrorCorrupt)
		r.Missed(start)
	} else if errors.Is(err, ErrMiss) {
		r.Missed(start)
	} else {
		r.Failed(ErrorLoad)
	}
}
