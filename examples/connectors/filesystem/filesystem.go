// Package filesystem is a KV connector that stores KV in files under a
// directory, with the semantics of vLLM's ExampleConnector.
//
// Its settings (kv_connector_extra_config) are:
//
//   - shared_storage_path: the directory to store KV in, created if it is
//     missing. Required. Connectors that name the same directory, in one
//     process, in several, or on several machines sharing a file system, see
//     each other's KV.
//   - durability: when a saved layer is forced to the disk; see below.
//     "file" by default.
//   - stale_temp_seconds: how old a temporary file must be before a worker
//     removes it as left by a writer that died; 600 (ten minutes) by
//     default, from 1 to 31536000 (a year).
//   - max_layer_bytes: the largest layer it saves or loads; a larger file
//     is a miss, refused before anything is allocated for it. 2 GiB by
//     default, at most 1 TiB.
//   - max_bytes_per_token: the most KV a layer holds for each token, so
//     that a layer of n tokens is at most n times this; a larger file is a
//     miss, refused the same way. 131072 (128 KiB) by default, from 1 to
//     1073741824. Set it to the model's size of one token's KV in one layer
//     for the tightest bound.
//
// KV is keyed by the model (Config.Model) as well as the prompt, so engines
// of several models can share one directory without ever seeing each
// other's KV, as long as each names its model: engines that leave Model
// empty share one unnamed model's keys.
//
// Each saved prefix of a prompt gets a directory named by its chained block
// hash, which covers the model, and each layer a file in it named by the
// layer's escaped name. A file is written under a temporary name and
// renamed into place, so a reader never sees half of one. It starts with a header that holds its
// format version, its length, a SHA-256 of whose KV it is and a CRC-32 of
// the KV, all checked on every load: a file that is corrupt, truncated, of
// another format version or not one of ours is a miss and a logged
// warning, never wrong KV, and the next save of that layer replaces it.
//
// # Durability
//
// KV is a cache: a layer lost is recomputed. What durability decides is
// how much an operating-system crash or a power cut can take, never whether
// wrong KV can be served, since the checks above catch a file that was
// torn, zero-filled or left short by a crash.
//
//   - "none": nothing is synced. The fastest: a save costs what writing
//     the page cache costs. A process that dies loses nothing it saved, but
//     an operating-system crash or a power cut can lose the layers saved in
//     the seconds before it (the kernel's writeback delay), read as misses.
//   - "file" (the default): each file is synced before its rename, so a
//     crash leaves either the old file or the whole new one, never a
//     damaged file that would cost a warning; the rename itself can still
//     be lost, which is a miss. A save costs a disk flush.
//   - "full": the prefix directory is synced too after the rename, so a
//     layer whose save returned survives a crash. Two flushes a save.
//
// # What the directory may hold
//
// Inside the storage directory the connector follows no symbolic link. A
// prefix directory or a layer file that is a link, or anything but a
// plain directory or a regular file, never matches and loads as a miss
// (with a warning). A save into a prefix directory that is a link fails;
// a save over a layer file that is a link replaces the link, since a
// rename replaces a name and never follows it. Paths are opened through an
// [os.Root] on the storage directory, so nothing outside it is read or
// written even when a link is swapped in while a path is being opened;
// what was opened is then compared with what Lstat found, so such a swap
// inside the directory is refused too. Files are opened without blocking,
// so a FIFO planted in place of a layer cannot hang a load. The storage
// directory itself may be a link: the operator chose it.
//
// A writer killed mid-save leaves its temporary file (named ".tmp-" and
// digits) behind; a worker-side connector removes such files once they are
// older than stale_temp_seconds, when it starts and then as often, and
// touches no other file. A save still writing its file after that long
// fails at its rename, and the layer is a miss.
package filesystem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// Options are the connector's settings, decoded from
// kv_connector_extra_config.
type Options struct {
	// SharedStoragePath is the directory to store KV in.
	SharedStoragePath string `json:"shared_storage_path" max:"4096"`
	// Durability is "none", "file" or "full"; see the package doc.
	Durability string `json:"durability"`
	// StaleTempSeconds is the age after which a temporary file is taken
	// for one a dead writer left: from a second to a year, so that it is
	// a valid interval for the sweeper's ticker.
	StaleTempSeconds int `json:"stale_temp_seconds" min:"1" max:"31536000"`
	// MaxLayerBytes bounds one layer's KV: larger saves are errors, and a
	// larger file is a miss, refused before anything is allocated for it
	// (the storage directory may be shared, and its files are not
	// trusted). At most 1 TiB.
	MaxLayerBytes int64 `json:"max_layer_bytes" min:"1" max:"1099511627776"`
	// MaxBytesPerToken bounds one layer's KV by its tokens: a layer of n
	// tokens holds at most n times this, and a load allocates no more,
	// since a file's checksum is no bound on its size (a file of zeros
	// with their CRC-32 is easy to forge).
	MaxBytesPerToken int64 `json:"max_bytes_per_token" min:"1" max:"1073741824"`
}

// Durability settings.
const (
	DurabilityNone = "none"
	DurabilityFile = "file"
	DurabilityFull = "full"
)

// DefaultStaleTempSeconds is the default of stale_temp_seconds.
const DefaultStaleTempSeconds = 600

// DefaultMaxLayerBytes is the default of max_layer_bytes: 2 GiB, four times
// a layer of 128k tokens of a model with 8 KV heads of 128 dimensions in
// 16 bits.
const DefaultMaxLayerBytes = 2 << 30

// DefaultMaxBytesPerToken is the default of max_bytes_per_token: 128 KiB,
// twice a token's KV in one layer of full multi-head attention of 64
// heads of 128 dimensions in 32 bits, and 32 times that of a model with 8
// KV heads of 128 dimensions in 16 bits.
const DefaultMaxBytesPerToken = 128 << 10

// Connector stores KV in files. It serves both roles: it implements
// [kv.Scheduler] and [kv.Worker], and
// [kv.LayerAppender].
type Connector struct {
	// Logger receives a warning for every file that fails its checks. New
	// sets it to the host's logger, cfg.Logger(); change it only before the
	// connector is used. nil means slog.Default().
	Logger *slog.Logger

	dir        string
	root       *os.Root
	cfg        kv.Config
	prefixes   kv.Prefixes     // keys of this model's prompts
	hashes     *kv.PrefixCache // prefixes, remembering a request's
	durability string
	maxLayer   int64 // max_layer_bytes
	perToken   int64 // max_bytes_per_token
	closed     atomic.Bool
	closeOnce  sync.Once
	stats      kv.StatsRecorder
	emit       kv.EventFunc
	held       *kv.HeldBlocks // the blocks reported stored
	stop       chan struct{}  // closed by Close
	swept      chan struct{}  // closed when the sweeper returns; nil without one
}

var (
	_ kv.Scheduler       = (*Connector)(nil)
	_ kv.Worker          = (*Connector)(nil)
	_ kv.LayerAppender   = (*Connector)(nil)
	_ kv.StatsReporter   = (*Connector)(nil)
	_ kv.EventReporter   = (*Connector)(nil)
	_ kv.RemovalReporter = (*Connector)(nil)
)

var (
	// errClosed is returned by calls on a closed connector.
	errClosed = errors.New("filesystem connector is closed")
	// errNotPlain is the reason for refusing a link or a special file.
	errNotPlain = errors.New("not a plain directory or regular file: links and special files in the storage directory are never followed")
)

// New creates a connector that stores KV in checksummed files under the
// directory the setting shared_storage_path names, with the semantics of
// vLLM's ExampleConnector. It creates the directory if it is missing. A
// worker-side connector sweeps stale temporary files in the background
// until it is closed.
func New(ctx context.Context, cfg kv.Config, role kv.Role) (*Connector, error) {
	prefixes, err := cfg.Prefixes()
	if err != nil {
		return nil, err
	}
	opts := Options{Durability: DurabilityFile, StaleTempSeconds: DefaultStaleTempSeconds, MaxLayerBytes: DefaultMaxLayerBytes, MaxBytesPerToken: DefaultMaxBytesPerToken}
	if err := kv.DecodeExtra(cfg.Extra, &opts); err != nil {
		return nil, err
	}
	if opts.SharedStoragePath == "" {
		return nil, errors.New("kv_connector_extra_config: shared_storage_path is required: the directory to store KV in")
	}
	switch opts.Durability {
	case DurabilityNone, DurabilityFile, DurabilityFull:
	default:
		return nil, fmt.Errorf("kv_connector_extra_config: durability %s: want %q, %q or %q", kv.Quote(opts.Durability), DurabilityNone, DurabilityFile, DurabilityFull)
	}
	root, err := openStorage(opts.SharedStoragePath)
	if err != nil {
		return nil, err
	}
	c := &Connector{Logger: cfg.Logger(), dir: opts.SharedStoragePath, root: root, cfg: cfg, prefixes: prefixes, hashes: prefixes.Cache(), held: prefixes.HeldBlocks(), durability: opts.Durability, maxLayer: opts.MaxLayerBytes, perToken: opts.MaxBytesPerToken, stop: make(chan struct{})}
	if role == kv.RoleWorker {
		c.swept = make(chan struct{})
		go c.sweepStale(time.Duration(opts.StaleTempSeconds) * time.Second)
	}
	return c, nil
}

// openStorage creates the storage directory if it is missing and opens it.
// Errors show the path quoted: it comes from the settings, and a raw
// control character must not reach a terminal.
func openStorage(path string) (*os.Root, error) {
	err := os.MkdirAll(path, 0o755)
	var root *os.Root
	if err == nil {
		root, err = os.OpenRoot(path)
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
		}
		return nil, fmt.Errorf("shared_storage_path %q: %w", path, err) // whole: at most 4096 bytes
	}
	return root, nil
}

// Close stops the sweeper and releases the storage directory. Calls that
// are under way finish.
func (c *Connector) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.stop)
		if c.swept != nil {
			<-c.swept
		}
		c.root.Close()
	})
	return nil
}

// MatchedTokens returns the longest block-aligned prefix of the prompt
// whose layers all have a file, less numComputed. Files are checked when
// loaded, not here, so that the scheduler does not read every layer.
func (c *Connector) MatchedTokens(ctx context.Context, req *kv.Request, numComputed int) (int, error) {
	if c.closed.Load() {
		return 0, errClosed
	}
	return c.prefixes.Matched(ctx, req, numComputed, func(h kv.BlockHash) (bool, error) {
		return c.stored(h), nil
	})
}

// stored reports whether every configured layer has a file for the prefix,
// or, with no layers configured, whether any layer has.
func (c *Connector) stored(prefix kv.BlockHash) bool {
	dir, err := c.openPrefix(prefix.String(), false)
	if err != nil {
		return false
	}
	defer dir.Close()
	if len(c.cfg.LayerNames) == 0 {
		found := false
		_ = eachEntry(dir, func(e fs.DirEntry) bool {
			found = e.Type().IsRegular() && isLayerFile(e.Name())
			return !found
		})
		return found
	}
	for _, l := range c.cfg.LayerNames {
		fi, err := dir.Lstat(fileName(l))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() < headerLen {
			return false
		}
	}
	return true
}

// AfterAlloc does nothing: loads need no preparation.
func (c *Connector) AfterAlloc(ctx context.Context, req *kv.Request, numExternal int) error {
	return nil
}

// RequestFinished does nothing: the connector keeps no state per request.
func (c *Connector) RequestFinished(ctx context.Context, req *kv.Request) error {
	return nil
}

// saveLayer writes kv to the layer's file for the prefix, replacing it
// atomically.
func (c *Connector) saveLayer(ctx context.Context, req *kv.Request, layer string, numTokens int, kvData []byte) error {
	if c.closed.Load() {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if layer == "" {
		return errors.New("save: empty layer name")
	}
	if int64(len(kvData)) > c.maxLayer {
		return fmt.Errorf("save layer %s: %d bytes of KV, more than max_layer_bytes (%d)", kv.Quote(layer), len(kvData), c.maxLayer)
	}
	if int64(len(kvData)) > c.limit(numTokens) {
		return fmt.Errorf("save layer %s: %d bytes of KV, more than max_bytes_per_token (%d) for %d tokens", kv.Quote(layer), len(kvData), c.perToken, numTokens)
	}
	h, err := c.hashes.Hash(req.PromptTokens, numTokens)
	if err != nil {
		return fmt.Errorf("save layer %s: %w", kv.Quote(layer), err)
	}
	dir, err := c.openPrefix(h.String(), true)
	if err != nil {
		return fmt.Errorf("save layer %s: %w", kv.Quote(layer), err)
	}
	defer dir.Close()
	if err := c.writeFile(dir, fileName(layer), h, layer, kvData); err != nil {
		return fmt.Errorf("save layer %s: %w", kv.Quote(layer), err)
	}
	return nil
}

// LoadLayer reads the layer's file for the prefix and checks it. A missing
// file is a miss; a file that fails a check is a miss and a warning.
func (c *Connector) LoadLayer(ctx context.Context, req *kv.Request, layer string, numTokens int) ([]byte, error) {
	kvData, err := c.AppendLayer(ctx, req, layer, numTokens, nil)
	if err != nil {
		return nil, err
	}
	return kvData, nil
}

// appendLayer is AppendLayer without the counting.
func (c *Connector) appendLayer(ctx context.Context, req *kv.Request, layer string, numTokens int, dst []byte) ([]byte, error) {
	if c.closed.Load() {
		return dst, errClosed
	}
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	h, err := c.hashes.Hash(req.PromptTokens, numTokens)
	if err != nil {
		return dst, fmt.Errorf("load layer %s: %w", kv.Quote(layer), err)
	}
	name := fileName(layer)
	out, err := c.readFile(ctx, h, layer, name, numTokens, dst)
	if err == nil {
		return out, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return dst, fmt.Errorf("load layer %s: %w", kv.Quote(layer), err) // the caller's doing, not the file's
	}
	if errors.Is(err, fs.ErrNotExist) {
		return dst, fmt.Errorf("layer %s of a %d-token prefix: %w", kv.Quote(layer), numTokens, kv.ErrMiss)
	}
	path := filepath.Join(c.dir, h.String(), name)
	c.logger().LogAttrs(ctx, slog.LevelWarn, "kv file unusable, treated as a miss",
		slog.String("file", path), slog.String("layer", layer), slog.String("reason", err.Error()))
	// Every block of the prefix fails with the layer's one checksum.
	return dst, &kv.LoadError{Layer: layer, EndBlock: numTokens / c.prefixes.BlockSize(), BlockSize: c.prefixes.BlockSize(),
		Err: fmt.Errorf("%q: %w", path, err)} // whole: a path cut short is no use
}

// limit is the most KV a layer of numTokens tokens may hold: what a load
// of it may allocate.
func (c *Connector) limit(numTokens int) int64 {
	if numTokens <= 0 {
		return 0
	}
	if int64(numTokens) > c.maxLayer/c.perToken {
		return c.maxLayer // and no overflow
	}
	return int64(numTokens) * c.perToken
}

// readFile appends the checked KV bytes of the layer file name of prefix h,
// a layer of numTokens tokens, to dst. An error wrapping fs.ErrNotExist
// means there is no such file. It allocates nothing for a file larger than
// the layer's limit, and reads in chunks, checking ctx before each.
func (c *Connector) readFile(ctx context.Context, h kv.BlockHash, layer, name string, numTokens int, dst []byte) ([]byte, error) {
	dir, err := c.openPrefix(h.String(), false)
	if err != nil {
		return dst, err
	}
	defer dir.Close()
	f, fi, err := openPlain(dir, name, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return dst, err
	}
	defer f.Close()
	var hdr [headerLen]byte
	if fi.Size() < headerLen {
		n, err := io.ReadFull(f, hdr[:fi.Size()])
		if err != nil {
			return dst, err
		}
		return dst, checkShort(hdr[:n])
	}
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return dst, fmt.Errorf("reading the header: %w", err)
	}
	sum, err := checkHeader(hdr[:], fi.Size(), h, layer)
	if err != nil {
		return dst, err
	}
	size := fi.Size() - headerLen
	if size > c.maxLayer {
		return dst, fmt.Errorf("%d bytes of KV, more than max_layer_bytes (%d)", size, c.maxLayer)
	}
	// A CRC-32 is no bound on size: all zeros with their CRC pass it.
	if limit := c.limit(numTokens); size > limit {
		return dst, fmt.Errorf("%d bytes of KV, more than the %d a load of %d tokens may take (max_bytes_per_token %d)", size, limit, numTokens, c.perToken)
	}
	if size > readChunk && !backed(fi) {
		// A sparse file's size is not proof of its bytes: a forged header
		// over a hole would have a load allocate what no disk holds. Its
		// checksum is verified first, through one chunk's buffer.
		got, err := readKV(ctx, io.NewSectionReader(f, headerLen, size), size, nil)
		if err != nil {
			return dst, err
		}
		if got != sum {
			return dst, errChecksum
		}
	}
	n := int(size)
	out := slices.Grow(dst, n)[:len(dst)+n]
	got, err := readKV(ctx, io.NewSectionReader(f, headerLen, size), size, out[len(dst):])
	if err != nil {
		return dst, err
	}
	if got != sum {
		return dst, errChecksum
	}
	return out, nil
}

// errChecksum is the reason for a file whose KV fails its CRC-32.
var errChecksum = errors.New("checksum mismatch: the KV bytes are corrupt")

// readChunk is how much readKV reads between checks of its context: a
// millisecond's reading or less, from the page cache.
const readChunk = 1 << 20

// readKV reads the n bytes of KV from r in chunks of readChunk, into kv if
// it is not nil (it then holds n bytes), else through a buffer of one
// chunk, and returns their CRC-32. It checks ctx before every chunk, so
// that a large layer does not outlive its caller's deadline.
func readKV(ctx context.Context, r io.Reader, n int64, kvData []byte) (uint32, error) {
	var buf []byte
	if kvData == nil {
		buf = make([]byte, min(n, readChunk))
	}
	var sum uint32
	for off := int64(0); off < n; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		m := min(n-off, readChunk)
		var p []byte
		if kvData != nil {
			p = kvData[off : off+m]
		} else {
			p = buf[:m]
		}
		if _, err := io.ReadFull(r, p); err != nil {
			return 0, fmt.Errorf("reading %d bytes of KV: %w", n, err)
		}
		sum = checksum(sum, p)
		off += m
	}
	return sum, nil
}

// WaitForSave returns at once: saves complete before SaveLayer returns.
func (c *Connector) WaitForSave(ctx context.Context) error {
	if c.closed.Load() {
		return errClosed
	}
	return nil
}

// Finished reports every finished request as sent and received, since
// transfers complete synchronously.
func (c *Connector) Finished(ctx context.Context, finished []string) (sent, received []string, err error) {
	return slices.Clone(finished), slices.Clone(finished), nil
}

func (c *Connector) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// openPrefix opens the directory of a prefix's layer files, named name,
// creating it if create is set. It refuses anything but a plain directory,
// and a directory swapped for a link while it was being opened.
func (c *Connector) openPrefix(name string, create bool) (*os.Root, error) {
	fi, err := c.root.Lstat(name)
	if create && errors.Is(err, fs.ErrNotExist) {
		if err = c.root.Mkdir(name, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
			fi, err = c.root.Lstat(name)
		}
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: %w", name, errNotPlain)
	}
	dir, err := c.root.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	if opened, err := dir.Stat("."); err != nil || !os.SameFile(fi, opened) {
		dir.Close()
		return nil, fmt.Errorf("%s: %w", name, errNotPlain)
	}
	return dir, nil
}

// openPlain opens the regular file dir/name with flag, refusing a link, a
// special file, and a file swapped in while it was being opened.
func openPlain(dir *os.Root, name string, flag int) (*os.File, fs.FileInfo, error) {
	fi, err := dir.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, errNotPlain
	}
	f, err := dir.OpenFile(name, flag, 0)
	if err != nil {
		return nil, nil, err
	}
	opened, err := f.Stat()
	if err != nil || !os.SameFile(fi, opened) {
		f.Close()
		return nil, nil, errNotPlain
	}
	return f, opened, nil
}

// tempPrefix starts the name of every temporary file, followed by decimal
// digits; layer file names never start with a dot.
const tempPrefix = ".tmp-"

// isTempFile reports whether name is one of the connector's temporary
// files.
func isTempFile(name string) bool {
	digits, ok := strings.CutPrefix(name, tempPrefix)
	return ok && digits != "" && strings.Trim(digits, "0123456789") == ""
}

// writeFile writes the file of kv, one layer of prefix h, to dir/name
// through a temporary file in the same directory, so that the rename
// replacing the file is atomic. A rename replaces a link at name rather
// than following it.
func (c *Connector) writeFile(dir *os.Root, name string, h kv.BlockHash, layer string, kvData []byte) (err error) {
	var f *os.File
	for range 100 {
		tmp := tempPrefix + strconv.FormatUint(uint64(rand.Uint32()), 10)
		// O_EXCL: a link planted at the name fails instead of being followed.
		f, err = dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	tmp := filepath.Base(f.Name())
	renamed := false // tmp is then no longer this save's to remove
	defer func() {
		if err != nil && !renamed {
			_ = f.Close()
			_ = dir.Remove(tmp)
		}
	}()
	if _, err = f.Write(appendHeader(make([]byte, 0, headerLen), h, layer, len(kvData), checksum(0, kvData))); err != nil {
		return err
	}
	if _, err = f.Write(kvData); err != nil {
		return err
	}
	if c.durability != DurabilityNone {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = dir.Rename(tmp, name); err != nil {
		return err
	}
	renamed = true
	if c.durability == DurabilityFull {
		if err = syncDir(dir); err != nil {
			return fmt.Errorf("saved, but the directory was not synced to disk (durability %q): %w", DurabilityFull, err)
		}
	}
	return nil
}

// syncDir flushes dir's entries to the disk.
func syncDir(dir *os.Root) error {
	d, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// eachEntry calls f with dir's entries until f returns false, reading
// them 256 at a time: a directory of millions of names, which anyone who
// shares the store can make, costs no more memory than a small one.
func eachEntry(dir *os.Root, f func(fs.DirEntry) bool) error {
	d, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			if !f(e) {
				return nil
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// layerSuffix ends every layer file name.
const layerSuffix = ".kv"

func isLayerFile(name string) bool {
	return strings.HasSuffix(name, layerSuffix) && !strings.HasPrefix(name, ".")
}
