package memory

import (
	"container/list"
	"fmt"
	"slices"
	"sync"

	"github.com/kvgen/kvgen/registry"
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
		return nil, fmt.Errorf("store %q is open with capacity_bytes %d, not %d: connectors sharing a store must agree on its capacity",
			name, s.capacity, capacity)
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
	prefix registry.BlockHash
	layer  string
}

type item struct {
	key itemKey
	kv  []byte
}

// store is a byte-bounded LRU cache of layers.
type store struct {
	name     string
	capacity int64
	refs     int // guarded by stores' mutex

	mu     sync.Mutex
	used   int64                      // bytes of KV held
	lru    *list.List                 // of *item, most recently used first
	items  map[itemKey]*list.Element  // into lru
	layers map[registry.BlockHash]int // layers held per prefix
}

func newStore(name string, capacity int64) *store {
	return &store{
		name:     name,
		capacity: capacity,
		lru:      list.New(),
		items:    map[itemKey]*list.Element{},
		layers:   map[registry.BlockHash]int{},
	}
}

// put stores kv, which the caller hands over, replacing what k held and
// evicting the least recently used items until it fits.
func (s *store) put(k itemKey, kv []byte) error {
	size := int64(len(kv))
	if size > s.capacity {
		return fmt.Errorf("layer %q of %d bytes does not fit in store %q of %d bytes (capacity_bytes)",
			k.layer, size, s.name, s.capacity)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[k]; ok {
		s.remove(e)
	}
	for s.used+size > s.capacity {
		s.remove(s.lru.Back())
	}
	s.items[k] = s.lru.PushFront(&item{key: k, kv: kv})
	s.layers[k.prefix]++
	s.used += size
	return nil
}

// remove drops the item at e; the caller holds s.mu.
func (s *store) remove(e *list.Element) {
	it := s.lru.Remove(e).(*item)
	delete(s.items, it.key)
	if s.layers[it.key.prefix]--; s.layers[it.key.prefix] == 0 {
		delete(s.layers, it.key.prefix)
	}
	s.used -= int64(len(it.kv))
}

// get returns a copy of what k holds and marks it most recently used.
func (s *store) get(k itemKey) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[k]
	if !ok {
		return nil, false
	}
	s.lru.MoveToFront(e)
	return slices.Clone(e.Value.(*item).kv), true
}

// has reports whether every one of layers is held for prefix, or, with no
// layers named, any layer at all. It does not count as a use.
func (s *store) has(prefix registry.BlockHash, layers []string) bool {
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
