package memory

import (
	"fmt"
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
}

func newStore(name string, capacity int64) *store {
	s := &store{
		name:     name,
		capacity: capacity,
		items:    map[itemKey]*item{},
		layers:   map[kv.BlockHash]int{},
	}
	s.head.prev, s.head.next = &s.head, &s.head
	return s
}

// put stores kv, which the caller hands over, replacing what k held and
// evicting the least recently used items until it fits.
//
// With events asked for, a prefix counts as loadable once it holds
// complete layers (at least one), and put reports whether k's prefix
// became loadable by this put and which prefixes stopped being loadable
// by its evictions; without, it reports nothing and allocates nothing for
// it.
func (s *store) put(k itemKey, kvData []byte, events bool, complete int) (stored bool, removed []kv.BlockHash, err error) {
	c := cost(k.layer, kvData)
	if c > s.capacity {
		return false, nil, fmt.Errorf("layer %s of %d bytes (%d with its name and bookkeeping) does not fit in store %s of %d bytes (capacity_bytes)",
			kv.Quote(k.layer), len(kvData), c, kv.Quote(s.name), s.capacity)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	had := s.layers[k.prefix] // with k's layer, if saved before: saving it again completes nothing
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
		if events && victim != k.prefix && s.layers[victim] == complete-1 {
			removed = append(removed, victim)
		}
	}
	it := &item{key: k, kvData: kvData, cost: c}
	s.pushFront(it)
	s.items[k] = it
	s.layers[k.prefix]++
	s.used += c
	now := s.layers[k.prefix]
	if events {
		if had >= complete && now < complete {
			removed = append(removed, k.prefix) // its own layers made room
		}
		stored = had < complete && now >= complete
	}
	return stored, removed, nil
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
