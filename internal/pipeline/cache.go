package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/kvgen/kvgen/internal/atomicfile"
	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/readfile"
)

// The cache remembers two things per manifest: what checking each
// constructor against the contract found, so that a run whose packages
// have not changed reads no export data, and what was last rendered.
//
// It cannot go stale: an entry's key is the hash of a gen.CheckInput,
// with the generator's own identity, and a gen.CheckInput holds the names of the
// export files the check reads in the go command's build cache, each the
// hash of that file's content (and export data holds every type the
// package's API reaches), with the rest of what the check reads. Any
// change to what the check reads is a new key. Only constructors that
// passed are remembered; problems are found again, so their messages are
// always current.
//
// Besides the checks, the cache keeps the hash of the last file rendered
// for the manifest and the key of the gen.RenderInput it was rendered from, so
// that kvgen check on an unchanged tree compares hashes instead of
// rendering; and the warm record (warm.go), with which a run that nothing
// can have changed loads no package at all.
//
// Its directory is still named "check" and cacheFormat "kvgen-check-1":
// renaming them would only orphan the files of earlier versions.

// Cache is one generator's cache of checks and renders. Runs given it in
// Options.Cache read it and add to it in memory; nothing is written until
// the caller calls Save. A nil *Cache is no cache.
type Cache struct {
	dir, identity string

	mu        sync.Mutex
	manifests map[string]*manifestCache // by file path
}

// OpenCache returns the cache kept in dir for the generator
// that identity names, such as its module version: what one generator
// found is not taken on trust by another, whose checks may differ. An
// empty dir or identity gives no cache (nil).
func OpenCache(dir, identity string) *Cache {
	if dir == "" || identity == "" {
		return nil
	}
	return &Cache{dir: dir, identity: identity, manifests: map[string]*manifestCache{}}
}

// Save writes back what the runs found, each manifest's file once and
// only if it changed. A file that cannot be written is left as it was:
// the cache only ever saves time.
func (c *Cache) Save() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.manifests {
		f.save()
	}
}

// forManifest returns the cache of the manifest at manifestAbs rendering
// output, read from its file the first time.
func (c *Cache) forManifest(manifestAbs, output string) *manifestCache {
	if c == nil {
		return &manifestCache{used: map[string]gen.Checked{}}
	}
	sum := sha256.Sum256([]byte(cacheFormat + "\x00" + manifestAbs + "\x00" + output))
	path := filepath.Join(c.dir, "check", hex.EncodeToString(sum[:16])+".json")
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.manifests[path]; ok {
		return f
	}
	f := &manifestCache{path: path, salt: cacheFormat + " " + c.identity, used: map[string]gen.Checked{}}
	if data, err := readfile.Read(path, readfile.Max); err == nil {
		if json.Unmarshal(data, &f.data) != nil {
			f.data = cacheFile{}
		}
		// A file kvgen did not write may hold null where a record goes:
		// that record is missing, as any that does not match is.
		f.data.Builds = slices.DeleteFunc(f.data.Builds, func(r *warmRecord) bool { return r == nil })
	}
	c.manifests[path] = f
	return f
}

// manifestCache is one manifest's checks and last render, kept in one
// file: read once, written once.
type manifestCache struct {
	path string // "" when there is no cache
	salt string

	mu      sync.Mutex
	data    cacheFile
	used    map[string]gen.Checked // entries this run used or made
	changed bool
}

type cacheFile struct {
	// Entries are checks that passed, by key.
	Entries map[string]gen.Checked `json:"entries"`
	// Render is the key of the last rendered file's inputs, and
	// Content the SHA-256 of what was rendered.
	Render  string `json:"render,omitempty"`
	Content string `json:"content,omitempty"`
	// Warm is what the last run that could leave one found, for the
	// warm path (see warm.go).
	Warm *warmRecord `json:"warm,omitempty"`
	// Builds are the warm records of runs for an overlay
	// (Options.ForOverlay), each with the file it rendered, newest
	// first: one for each target and selection a deployment is built
	// with, up to maxBuildRecords.
	Builds []*warmRecord `json:"builds,omitempty"`
}

// cacheFormat changes whenever the cache file's layout changes, or what a
// check concludes or what the renderer writes from the same inputs
// changes in a way a version number might not show (a development build).
// The keys need no help: they encode their inputs' fields by name.
const cacheFormat = "kvgen-check-1"

// Key names the check of one entry: "" when there is no cache, or an
// export file is missing, so that nothing is cached.
func (c *manifestCache) Key(in gen.CheckInput) string {
	if in.RegistryExport == "" || in.ContractExport == "" || in.PackageExport == "" {
		return ""
	}
	return c.hash(in)
}

// hash is the key of what was computed from in, a value that holds the
// whole of it in exported fields, which JSON encodes; with the salt, so
// that what one generator computed is not taken on trust by another. It
// is "" when there is no cache.
func (c *manifestCache) hash(in any) string {
	if c.path == "" {
		return ""
	}
	data, err := json.Marshal(in)
	if err != nil {
		return "" // not cached
	}
	return hashFields(c.salt, string(data))
}

// Get returns the check remembered under key.
func (c *manifestCache) Get(key string) (gen.Checked, bool) {
	if key == "" {
		return gen.Checked{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.used[key]; ok {
		return r, true // found by this run or another of the same process
	}
	r, ok := c.data.Entries[key]
	if ok {
		c.used[key] = r
	}
	return r, ok
}

// Put remembers under key a check that passed.
func (c *manifestCache) Put(key string, r gen.Checked) {
	if key == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.used[key] = r
	c.changed = true
}

// rendered reports whether content is what was last rendered from the
// inputs named by key.
func (c *manifestCache) rendered(key string, content []byte) bool {
	if c.path == "" || key == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data.Render == key && c.data.Content == hashBytes(content)
}

// remember records the file rendered from the inputs named by key.
func (c *manifestCache) remember(key string, content []byte) {
	if c.path == "" || key == "" {
		return
	}
	sum := hashBytes(content)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data.Render != key || c.data.Content != sum {
		c.data.Render, c.data.Content, c.changed = key, sum, true
	}
}

// warm returns the warm record, or nil.
func (c *manifestCache) warm() *warmRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data.Warm
}

// setWarm replaces the warm record; nil drops it.
func (c *manifestCache) setWarm(r *warmRecord) {
	if c.path == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !reflect.DeepEqual(c.data.Warm, r) {
		c.data.Warm, c.changed = r, true
	}
}

// maxBuildRecords bounds the records of runs for an overlay: with
// maxWarmRendered bytes each, the cache file stays well under what
// readfile reads.
const maxBuildRecords = 4

// built returns the record of a run for an overlay whose key is key, or
// nil.
func (c *manifestCache) built(key string) *warmRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.data.Builds {
		if r.Key == key {
			return r
		}
	}
	return nil
}

// setBuilt puts r first among the records of runs for an overlay, in
// place of the one of key, and drops the oldest past maxBuildRecords;
// a nil r drops the record of key.
func (c *manifestCache) setBuilt(key string, r *warmRecord) {
	if c.path == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.data.Builds, func(b *warmRecord) bool { return b.Key == key })
	switch {
	case i == 0 && r != nil && reflect.DeepEqual(c.data.Builds[0], r):
		return // as it was: the file need not be written again
	case i >= 0:
		c.data.Builds = slices.Delete(c.data.Builds, i, i+1)
	case r == nil:
		return
	}
	if r != nil {
		c.data.Builds = slices.Insert(c.data.Builds, 0, r)
		c.data.Builds = c.data.Builds[:min(len(c.data.Builds), maxBuildRecords)]
	}
	c.changed = true
}

// keepChecks keeps every check the file holds, as a run that used them
// all would: a warm run uses none, and the next run may need them all.
func (c *manifestCache) keepChecks() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, r := range c.data.Entries {
		if _, ok := c.used[k]; !ok {
			c.used[k] = r
		}
	}
}

// save writes the cache back, keeping only the entries the runs used, so
// that the file stays the size of the manifest. Failing to write is not
// an error.
func (c *manifestCache) save() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" || (!c.changed && len(c.used) == len(c.data.Entries)) {
		return
	}
	c.data.Entries, c.changed = maps.Clone(c.used), false
	data, err := json.Marshal(c.data)
	if err != nil {
		return
	}
	_ = atomicfile.Write(c.path, data) // a cache that cannot be written is no cache
}

// hashFields hashes fields so that no two lists of fields share a hash.
func hashFields(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		h.Write([]byte(strconv.Itoa(len(f))))
		h.Write([]byte{':'})
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
