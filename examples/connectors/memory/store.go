package memory

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kvgen/kvgen/registry/kv"
)

// stores holds this process's stores by name. vLLM builds the scheduler side
// and the worker side as two connectors, which meet only through state both
// can reach; in one process that is this table. Reference counts drop a
// store, and its memory, when its last connector closes.
var stores = struct {
	sync.Mutex
	byName map[string]*store
}{byName: map[string]*store{}}

// acquire returns the store called name, creating it if no connector uses
// it, and takes a reference to it.
func acquire(name string, capacity int64) (*store, error) {
	stores.Lock()
	defer stores.Unlock()
	s, ok := stores.byName[name]
	if !ok {
		s = newStore(name, capacity)
		stores.byName[name] = s
	} else if s.capacity != capacity {
		return nil, fmt.Errorf("store %s is open with capacity_bytes %d, not %d: connectors sharing a store must agree on its capacity",
			kv.Quote(name), s.capacity, capacity)
	}
	s.refs++
	return s, nil
}

// release drops a reference to s, and s itself with the last one.
func release(s *store) {
	stores.Lock()
	defer stores.Unlock()
	if s.refs--; s.refs == 0 {
		delete(stores.byName, s.name)
	}
}

// itemKey identifies one layer of one prefix: the unit of eviction.
type itemKey struct {
	prefix kv.BlockHash
	layer  string
}

// item is one layer held, in the store's map and in its list of items by
// recency of use.
type item struct {
	key        itemKey
	kvData     []byte // never written once stored, so read without the lock
	cost       int64
	prev, next *item
}

// entryOverhead is what the store spends on an item besides its KV bytes
// and its layer name: the item itself (96 bytes), its entries in the two
// maps, and their share of maps that have just doubled, which leaves them
// less than half full. Heap measurements put it at up to about 340 bytes
// (TestEntryCostCoversHeap); the bound errs on the side of the heap.
const entryOverhead = 384

// cost is what an item of kv for layer takes from the capacity.
func cost(layer string, kvData []byte) int64 {
	return int64(cap(kvData)) + int64(len(layer)) + entryOverhead
}

// store is a byte-bounded LRU cache of layers. Its bound counts every
// item's cost: KV bytes, layer name and bookkeeping.
type store struct {
	name     string
	capacity int64
	refs     int // guarded by stores' mutex

	mu     sync.Mutex
	used   int64                // cost of the items held
	head   item                 // sentinel: head.next is the most recently used
	items  map[itemKey]*item    // the items in the list
	layers map[kv.BlockHash]int // layers held per prefix
	events map[groupKey]*eventGroup
}

// groupKey names an eventGroup: a model and block size, and the layers
// its connectors load, joined.
type groupKey struct {
	prefixes kv.Prefixes
	layers   string
}

// eventGroup is the connectors of one model and block size that load the
// same layers: the blocks the store holds of their prompts, and where to
// report changes to them.
type eventGroup struct {
	key       groupKey
	held      *kv.HeldBlocks
	layers    []string        // what makes a prefix loadable; none: any layer
	reporters []*kv.EventFunc // one a connector of the group
}

// emit reports e to every connector of the group that asks for events.
func (g *eventGroup) emit(e kv.KVEvent) {
	for _, r := range g.reporters {
		if emit := r.Get(); emit != nil {
			emit(e)
		}
	}
}

// reporting reports whether a connector of the group asks for events.
func (g *eventGroup) reporting() bool {
	for _, r := range g.reporters {
		if r.Get() != nil {
			return true
		}
	}
	return false
}

// join adds a connector of prefixes, for which layers make a prefix
// loadable (any layer, if none), reporting through r, and returns its
// group.
func (s *store) join(prefixes kv.Prefixes, layers []string, r *kv.EventFunc) *eventGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := groupKey{prefixes, strings.Join(layers, "\x00")}
	g := s.events[key]
	if g == nil {
		g = &eventGroup{key: key, held: prefixes.HeldBlocks(), layers: slices.Clone(layers)}
		s.events[key] = g
	}
	g.reporters = append(g.reporters, r)
	return g
}

// leave removes the connector reporting through r from g.
func (s *store) leave(g *eventGroup, r *kv.EventFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g.reporters = slices.DeleteFunc(g.reporters, func(o *kv.EventFunc) bool { return o == r })
}

func newStore(name string, capacity int64) *store {
	s := &store{
		name:     name,
		capacity: capacity,
		items:    map[itemKey]*item{},
		layers:   map[kv.BlockHash]int{},
		events:   map[groupKey]*eventGroup{},
	}
	s.head.prev, s.head.next = &s.head, &s.head
	return s
}

// put stores kv, which the caller hands over, for the prefix of tokens in
// g, replacing what k held and evicting the least recently used items
// until it fits.
//
// A prefix is loadable for a group once it holds every layer the group
// loads. Each prefix an eviction leaves short of them is reported
// removed, to every group that held it, before k's prefix is reported
// stored to each group of g's model that this put made it loadable for
// and a connector of which asks for events; with none asking, nothing is
// built for it.
func (s *store) put(k itemKey, kvData []byte, g *eventGroup, tokens []uint32) error {
	c := cost(k.layer, kvData)
	if c > s.capacity {
		return fmt.Errorf("layer %s of %d bytes (%d with its name and bookkeeping) does not fit in store %s of %d bytes (capacity_bytes)",
			kv.Quote(k.layer), len(kvData), c, kv.Quote(s.name), s.capacity)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The groups of g's model, and whether each loaded k's prefix before:
	// saving a layer again completes nothing.
	var groups []*eventGroup
	var had []bool
	for _, og := range s.events {
		if og.key.prefixes == g.key.prefixes {
			groups, had = append(groups, og), append(had, s.loadable(k.prefix, og))
		}
	}
	if it, ok := s.items[k]; ok {
		k.layer = it.key.layer // already the store's own copy
		s.remove(it)
	} else {
		// The store's own copy: the caller's may share a larger array.
		k.layer = strings.Clone(k.layer)
	}
	for s.used+c > s.capacity {
		victim := s.head.prev.key.prefix
		s.remove(s.head.prev)
		if victim != k.prefix {
			s.evicted(victim)
		}
	}
	it := &item{key: k, kvData: kvData, cost: c}
	s.pushFront(it)
	s.items[k] = it
	s.layers[k.prefix]++
	s.used += c
	s.evicted(k.prefix) // its own layers may have made room
	for i, og := range groups {
		if !had[i] && s.loadable(k.prefix, og) && og.reporting() {
			og.held.Stored(tokens, kv.MediumCPU, og.emit)
		}
	}
	return nil
}

// evicted reports prefix removed to each group that held it and no
// longer holds its complete layers; the caller holds s.mu. Only groups
// that asked for events when it was stored hold it.
func (s *store) evicted(prefix kv.BlockHash) {
	for _, g := range s.events {
		if g.held.Holds(prefix) && !s.loadable(prefix, g) {
			g.held.Removed(prefix, kv.MediumCPU, g.emit)
		}
	}
}

// loadable reports whether g's connectors can load prefix; the caller
// holds s.mu.
func (s *store) loadable(prefix kv.BlockHash, g *eventGroup) bool {
	return s.holds(prefix, g.layers)
}

// remove drops it; the caller holds s.mu.
func (s *store) remove(it *item) {
	it.prev.next, it.next.prev = it.next, it.prev
	delete(s.items, it.key)
	if s.layers[it.key.prefix]--; s.layers[it.key.prefix] == 0 {
		delete(s.layers, it.key.prefix)
	}
	s.used -= it.cost
}

// pushFront makes it the most recently used item; the caller holds s.mu.
func (s *store) pushFront(it *item) {
	it.prev, it.next = &s.head, s.head.next
	s.head.next.prev = it
	s.head.next = it
}

// appendTo appends what k holds to dst and marks it most recently used.
// The copy is made outside the lock, so loads of large layers run in
// parallel.
func (s *store) appendTo(dst []byte, k itemKey) ([]byte, bool) {
	s.mu.Lock()
	it, ok := s.items[k]
	if ok {
		it.prev.next, it.next.prev = it.next, it.prev
		s.pushFront(it)
	}
	s.mu.Unlock()
	if !ok {
		return dst, false
	}
	return append(dst, it.kvData...), true
}

// has reports whether every one of layers is held for prefix, or, with no
// layers named, any layer at all. It does not count as a use.
func (s *store) has(prefix kv.BlockHash, layers []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds(prefix, layers)
}

// holds is has for a caller that holds s.mu.
func (s *store) holds(prefix kv.BlockHash, layers []string) bool {
	if len(layers) == 0 {
		return s.layers[prefix] > 0
	}
	for _, l := range layers {
		if _, ok := s.items[itemKey{prefix, l}]; !ok {
			return false
		}
	}
	return true
}
