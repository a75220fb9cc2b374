package gen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/kvgen/kvgen/internal/atomicfile"
	"github.com/kvgen/kvgen/internal/readfile"
)

// The check cache remembers what checking a constructor against the
// contract found, so that a run whose packages have not changed reads no
// export data.
//
// It cannot go stale: an entry's key is the name of its package's export
// file in the go command's build cache, which is the hash of that file's
// content (and export data holds every type the package's API reaches),
// with the registry package's export file, the constructor's name, the
// roles and the generator's own identity. Any change to what the check
// reads is a new key. Only constructors that passed are remembered;
// problems are found again, so their messages are always current.
//
// Besides the entries, the cache keeps the hash of the last file rendered
// for the manifest and the key of everything that went into it, so that
// kvgen check on an unchanged tree compares hashes instead of rendering.

// CheckCache is one generator's check cache. Runs given it in
// Options.Cache read it and add to it in memory; nothing is written until
// the caller calls Save. A nil *CheckCache is no cache.
type CheckCache struct {
	dir, identity string

	mu    sync.Mutex
	files map[string]*checkCache // by file path
}

// OpenCheckCache returns the check cache kept in dir for the generator
// that identity names, such as its module version: what one generator
// found is not taken on trust by another, whose checks may differ. An
// empty dir or identity gives no cache (nil).
func OpenCheckCache(dir, identity string) *CheckCache {
	if dir == "" || identity == "" {
		return nil
	}
	return &CheckCache{dir: dir, identity: identity, files: map[string]*checkCache{}}
}

// Save writes back what the runs found, each manifest's file once and
// only if it changed. A file that cannot be written is left as it was:
// the cache only ever saves time.
func (c *CheckCache) Save() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.files {
		f.save()
	}
}

// file returns the cache of the manifest at manifestAbs rendering output,
// read from its file the first time.
func (c *CheckCache) file(manifestAbs, output string) *checkCache {
	if c == nil {
		return &checkCache{used: map[string]cachedCheck{}}
	}
	sum := sha256.Sum256([]byte(cacheFormat + "\x00" + manifestAbs + "\x00" + output))
	path := filepath.Join(c.dir, "check", hex.EncodeToString(sum[:16])+".json")
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.files[path]; ok {
		return f
	}
	f := &checkCache{path: path, salt: cacheFormat + " " + c.identity, used: map[string]cachedCheck{}}
	if data, err := readfile.Read(path, readfile.Max); err == nil {
		if json.Unmarshal(data, &f.data) != nil {
			f.data = cacheFile{}
		}
	}
	c.files[path] = f
	return f
}

// checkCache is one manifest's cache file: read once, written once.
type checkCache struct {
	path string // "" when there is no cache
	salt string

	mu      sync.Mutex
	data    cacheFile
	used    map[string]cachedCheck // entries this run used or made
	changed bool
}

type cacheFile struct {
	// Entries are checks that passed, by key.
	Entries map[string]cachedCheck `json:"entries"`
	// Render is the key of the last rendered file's inputs, and
	// Content the SHA-256 of what was rendered.
	Render  string `json:"render,omitempty"`
	Content string `json:"content,omitempty"`
}

// cachedCheck is what a passing check found that the registry needs.
type cachedCheck struct {
	Adapt    bool   `json:"adapt,omitempty"`
	DeclFile string `json:"decl_file"`
	DeclLine int    `json:"decl_line"`
}

// cacheFormat changes whenever what a check concludes or what the
// renderer writes changes in a way a version number might not show (a
// development build).
const cacheFormat = "kvgen-check-1"

// key names the check of one entry.
// reg holds the export files of the registry package and of the
// contract's package, separated by NULs; contractName is "" for the KV
// connector contract.
func (c *checkCache) key(reg, pkg, pkgPath, constructor string, roles []string, contractName string) string {
	if c.path == "" || reg == "" || pkg == "" {
		return ""
	}
	var regs []string
	for _, f := range strings.Split(reg, "\x00") {
		regs = append(regs, filepath.Base(f))
	}
	return hashFields(c.salt, strings.Join(regs, "\x00"), filepath.Base(pkg), pkgPath, constructor, strings.Join(roles, ","), contractName)
}

func (c *checkCache) get(key string) (cachedCheck, bool) {
	if key == "" {
		return cachedCheck{}, false
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

func (c *checkCache) put(key string, r cachedCheck) {
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
func (c *checkCache) rendered(key string, content []byte) bool {
	if c.path == "" || key == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data.Render == key && c.data.Content == hashBytes(content)
}

// remember records the file rendered from the inputs named by key.
func (c *checkCache) remember(key string, content []byte) {
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

// save writes the cache back, keeping only the entries the runs used, so
// that the file stays the size of the manifest. Failing to write is not
// an error.
func (c *checkCache) save() {
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
