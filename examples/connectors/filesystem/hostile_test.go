package filesystem

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// A prefix directory planted as a link to a directory elsewhere neither
// receives writes nor serves reads, even when what it leads to holds
// valid files for that very prefix.
func TestPrefixDirectoryLinkNotFollowed(t *testing.T) {
	ctx := t.Context()
	dir, elsewhere := t.TempDir(), t.TempDir()
	c, rec := open(t, dir)

	// Valid files for the prefix, made by a connector on the other directory.
	other, _ := open(t, elsewhere)
	require.NoError(t, other.SaveLayer(ctx, req, layers[0], bs, []byte("planted")))
	require.NoError(t, other.SaveLayer(ctx, req, layers[1], bs, []byte("planted")))
	prefix := filepath.Dir(layerFile(t, dir, layers[0], bs))
	require.NoError(t, os.Symlink(filepath.Dir(layerFile(t, elsewhere, layers[0], bs)), prefix))

	n, err := c.MatchedTokens(ctx, req, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "a linked prefix directory never matches")
	got, err := c.LoadLayer(ctx, req, layers[0], bs)
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.ErrorContains(t, err, "never followed")
	assert.Nil(t, got)
	assert.Len(t, rec.warnings(), 1)

	before := readTree(t, elsewhere)
	err = c.SaveLayer(ctx, req, layers[0], bs, []byte("redirected?"))
	require.ErrorContains(t, err, "never followed")
	assert.Equal(t, before, readTree(t, elsewhere), "a save wrote through the link")
}

// A layer file planted as a link is not read through; a save replaces the
// link, leaving what it led to alone.
func TestLayerFileLinkNotFollowed(t *testing.T) {
	ctx := t.Context()
	dir, elsewhere := t.TempDir(), t.TempDir()
	c, rec := open(t, dir)
	require.NoError(t, c.SaveLayer(ctx, req, layers[0], bs, []byte("genuine")))
	path := layerFile(t, dir, layers[0], bs)
	target := filepath.Join(elsewhere, "target")
	require.NoError(t, os.Rename(path, target)) // a valid file, only moved
	require.NoError(t, os.Symlink(target, path))

	got, err := c.LoadLayer(ctx, req, layers[0], bs)
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.ErrorContains(t, err, "never followed")
	assert.Nil(t, got)
	assert.Equal(t, []string{path}, rec.warnings())

	want, err := os.ReadFile(target)
	require.NoError(t, err)
	require.NoError(t, c.SaveLayer(ctx, req, layers[0], bs, []byte("new")))
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the save replaced the link with a file")
	after, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, want, after, "the save wrote through the link")
	got, err = c.LoadLayer(ctx, req, layers[0], bs)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
}

// A file of format version 1, whose KV checksum was a SHA-256, is a miss.
func TestOldFormatIsAMiss(t *testing.T) {
	ctx := t.Context()
	c, rec, path := savedLayer(t)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	binary.LittleEndian.PutUint32(data[8:], 1)
	require.NoError(t, os.WriteFile(path, data, 0o600))

	_, err = c.LoadLayer(ctx, req, layers[0], bs)
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.ErrorContains(t, err, "format version 1, want 2")
	assert.Equal(t, []string{path}, rec.warnings())
}

// A file whose header claims a huge layer, with the file as large (sparse),
// is a miss refused before anything is allocated for it: an engine that
// loads from a shared directory cannot be made to run out of memory.
func TestHugeLayerFileIsAMiss(t *testing.T) {
	ctx := t.Context()
	c, rec, path := savedLayer(t)
	const huge = 1 << 40
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], huge)
	_, err = f.WriteAt(n[:], 12)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(headerLen+huge))
	require.NoError(t, f.Close())

	_, err = c.LoadLayer(ctx, req, layers[0], bs)
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.ErrorContains(t, err, "more than max_layer_bytes")
	assert.Equal(t, []string{path}, rec.warnings())

	big := make([]byte, 1<<10)
	small, err := New(ctx, kv.Config{BlockSize: bs, Extra: map[string]any{
		"shared_storage_path": t.TempDir(), "max_layer_bytes": len(big) - 1,
	}}, kv.RoleWorker)
	require.NoError(t, err)
	defer small.Close()
	assert.ErrorContains(t, small.SaveLayer(ctx, req, layers[0], bs, big), "more than max_layer_bytes")
}

// forgeSparse makes the layer file at path claim size bytes of KV, with the
// file as long, sparse: the disk holds the header and nothing more.
func forgeSparse(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(size))
	_, err = f.WriteAt(n[:], 12)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(headerLen+size))
	require.NoError(t, f.Close())
}

// forgeZeros makes the layer file at path claim size bytes of KV that are
// all zeros, with their CRC-32 in the header: a file anyone who read one
// real header can forge, which passes every check but a bound on size.
// Past the header it is a hole, so the disk holds nothing of it.
func forgeZeros(t *testing.T, path string, size int64) {
	t.Helper()
	require.NoError(t, os.Truncate(path, headerLen)) // the real KV goes
	forgeSparse(t, path, size)
	zeros := make([]byte, readChunk)
	var sum uint32
	for left := size; left > 0; left -= int64(len(zeros)) {
		sum = checksum(sum, zeros[:min(left, int64(len(zeros)))])
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var crc [4]byte
	binary.LittleEndian.PutUint32(crc[:], sum)
	_, err = f.WriteAt(crc[:], 52)
	require.NoError(t, err)
}

// A forged file of zeros whose CRC-32 matches, claiming more KV than a
// load of its tokens may hold (max_bytes_per_token a token), is a miss
// refused from its header, before anything is allocated for it. A forged
// 1.5 GiB file once passed every check: each load of it allocated 1.5 GiB
// and returned zeros, and eight at once ran the server out of memory.
func TestForgedLayerFileIsBoundedByItsTokens(t *testing.T) {
	c, rec, path := savedLayer(t)
	forgeZeros(t, path, 64<<20)

	before := totalAlloc()
	got, err := c.LoadLayer(t.Context(), req, layers[0], bs)
	allocated := totalAlloc() - before
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.Nil(t, got)
	assert.ErrorContains(t, err, "max_bytes_per_token")
	assert.Equal(t, []string{path}, rec.warnings())
	assert.Less(t, allocated, uint64(1<<20), "a load allocated %d bytes for a forged 64 MiB file", allocated)
}

// max_bytes_per_token bounds a layer by the tokens it holds: a save of
// more is an error, a file of more is a miss, and a layer of exactly the
// bound saves and loads.
func TestMaxBytesPerToken(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	c, err := New(ctx, kv.Config{BlockSize: bs, Extra: map[string]any{
		"shared_storage_path": dir, "max_bytes_per_token": 8,
	}}, kv.RoleWorker)
	require.NoError(t, err)
	defer c.Close()
	c.Logger = slog.New(&recorder{})

	err = c.SaveLayer(ctx, req, layers[0], bs, make([]byte, 8*bs+1))
	assert.ErrorContains(t, err, "more than max_bytes_per_token (8) for 4 tokens")
	full := bytes.Repeat([]byte{1}, 8*bs)
	require.NoError(t, c.SaveLayer(ctx, req, layers[0], bs, full))
	got, err := c.LoadLayer(ctx, req, layers[0], bs)
	require.NoError(t, err)
	assert.Equal(t, full, got)

	// A file another connector saved, valid but one byte over the bound.
	other, _ := open(t, dir)
	require.NoError(t, other.SaveLayer(ctx, req, layers[1], bs, make([]byte, 8*bs+1)))
	_, err = c.LoadLayer(ctx, req, layers[1], bs)
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.ErrorContains(t, err, "33 bytes of KV, more than the 32 a load of 4 tokens may take (max_bytes_per_token 8)")
}

// totalAlloc returns how many bytes the program has allocated so far.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// A sparse file whose header claims 1 GiB, within max_layer_bytes, is a
// miss without anything near 1 GiB being allocated: the disk does not hold
// the bytes its size claims, so the checksum is verified before the layer
// is allocated. It once cost a load 1 to 2 GiB of memory.
func TestSparseLayerFileIsAMissWithoutAllocating(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a forged 1 GiB file to its end: the full run covers it")
	}
	c, rec, path := savedLayerWith(t, roomy)
	forgeSparse(t, path, 1<<30)

	before := totalAlloc()
	_, err := c.LoadLayer(t.Context(), req, layers[0], bs)
	allocated := totalAlloc() - before
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.ErrorContains(t, err, "checksum mismatch")
	assert.Equal(t, []string{path}, rec.warnings())
	assert.Less(t, allocated, uint64(16<<20), "a load allocated %d bytes for a forged 1 GiB file", allocated)
}

// A load honours its context while it reads: a deadline that passes
// during a long read ends the load then, with the context's error, not a
// warning about the file. It once read the whole file first.
func TestLoadStopsAtTheDeadline(t *testing.T) {
	c, rec, path := savedLayerWith(t, roomy)
	forgeSparse(t, path, 1<<30)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.LoadLayer(ctx, req, layers[0], bs)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, kv.ErrMiss)
	assert.Less(t, elapsed, 500*time.Millisecond, "the load outlived its deadline")
	assert.Empty(t, rec.warnings(), "the file is not to blame")

	// A file the disk holds whole is read in chunks too.
	dense := make([]byte, 64<<20)
	for i := range dense {
		dense[i] = byte(i)
	}
	require.NoError(t, c.SaveLayer(t.Context(), req, layers[1], bs, dense))
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	_, err = c.readFile(ctx, mustHash(t), layers[1], fileName(layers[1]), bs, nil)
	require.ErrorIs(t, err, context.Canceled)
	got, err := c.LoadLayer(t.Context(), req, layers[1], bs)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(dense, got), "a layer of many chunks loads whole")
}

// mustHash is the hash of req's first block.
func mustHash(t testing.TB) kv.BlockHash {
	p, err := kv.NewPrefixes("", bs)
	require.NoError(t, err)
	h, err := p.Hash(req.PromptTokens, bs)
	require.NoError(t, err)
	return h
}

// A worker removes its own temporary files once they are older than the
// grace period, and nothing else.
func TestStaleTemporaryFilesSwept(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	c, _ := open(t, dir)
	require.NoError(t, c.SaveLayer(ctx, req, layers[0], bs, []byte("kv")))
	require.NoError(t, c.Close())
	prefix := filepath.Dir(layerFile(t, dir, layers[0], bs))
	old := time.Now().Add(-2 * time.Hour)
	plant := func(path string, age time.Time) string {
		require.NoError(t, os.WriteFile(path, []byte("left behind"), 0o600))
		require.NoError(t, os.Chtimes(path, age, age))
		return path
	}
	stale := plant(filepath.Join(prefix, ".tmp-123456789"), old)
	kept := []string{
		plant(filepath.Join(prefix, ".tmp-987654321"), time.Now()), // may be a live writer's
		plant(filepath.Join(prefix, ".tmp-notdigits"), old),        // not our naming
		plant(filepath.Join(prefix, "notes.txt"), old),             // not ours
		plant(filepath.Join(dir, ".tmp-123"), old),                 // not in a prefix directory
		plant(filepath.Join(t.TempDir(), ".tmp-555"), old),         // outside, reached by a link
		layerFile(t, dir, layers[0], bs),                           // the layer itself
	}
	require.NoError(t, os.Symlink(kept[4], filepath.Join(prefix, ".tmp-555")))
	require.NoError(t, os.Symlink(filepath.Dir(kept[4]), filepath.Join(dir, strings.Repeat("ab", 32))))

	w, err := New(ctx, kv.Config{BlockSize: bs, Extra: map[string]any{
		"shared_storage_path": dir, "stale_temp_seconds": 3600,
	}}, kv.RoleWorker)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := os.Lstat(stale)
		return os.IsNotExist(err)
	}, 10*time.Second, 10*time.Millisecond, "the stale temporary file is removed")
	require.NoError(t, w.Close())
	for _, p := range kept {
		_, err := os.Lstat(p)
		assert.NoError(t, err, "%s must stay", p)
	}
	_, err = os.Lstat(filepath.Join(prefix, ".tmp-555"))
	assert.NoError(t, err, "a link named like a temporary file is not ours")
}

// A writer killed with SIGKILL mid-save leaves a temporary file, which a
// worker started later removes once it is older than the grace period.
func TestKilledWriterTemporaryFilesSwept(t *testing.T) {
	if dir := os.Getenv("KVGEN_FS_WRITER_DIR"); dir != "" {
		writeForever(t, dir)
		return
	}
	dir := t.TempDir()
	temps := killWriter(t, dir)
	// A kill between a rename and the next temporary file leaves none:
	// rare, and another writer is killed then.
	for attempt := 1; len(temps) == 0 && attempt < 5; attempt++ {
		temps = killWriter(t, dir)
	}
	require.NotEmpty(t, temps, "the killed writer left no temporary file behind")

	time.Sleep(1100 * time.Millisecond) // the files age past a 1 s grace period
	w, err := New(t.Context(), kv.Config{BlockSize: bs, Extra: map[string]any{
		"shared_storage_path": dir, "stale_temp_seconds": 1, "max_bytes_per_token": 1 << 30,
	}}, kv.RoleWorker)
	require.NoError(t, err)
	defer w.Close()
	require.Eventually(t, func() bool {
		temps, _ = filepath.Glob(filepath.Join(dir, "*", ".tmp-*"))
		return len(temps) == 0
	}, 10*time.Second, 10*time.Millisecond, "temporary files left: %v", temps)
	got, err := w.LoadLayer(t.Context(), req, layers[0], bs)
	if err == nil {
		assert.True(t, bytes.Equal(bytes.Repeat([]byte{7}, 16<<20), got), "a layer file holds wrong KV")
	}
}

// killWriter starts a process saving to dir, kills it with SIGKILL while
// it has a temporary file, and returns the temporary files left.
func killWriter(t *testing.T, dir string) []string {
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriterTemporaryFilesSwept$")
	cmd.Env = append(os.Environ(), "KVGEN_FS_WRITER_DIR="+dir)
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool {
		temps, _ := filepath.Glob(filepath.Join(dir, "*", ".tmp-*"))
		return len(temps) > 0
	}, 30*time.Second, time.Millisecond, "the writer never had a temporary file")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	temps, err := filepath.Glob(filepath.Join(dir, "*", ".tmp-*"))
	require.NoError(t, err)
	return temps
}

// writeForever saves a large layer again and again, until killed.
func writeForever(t *testing.T, dir string) {
	c, err := New(context.Background(), kv.Config{BlockSize: bs, Extra: map[string]any{
		"shared_storage_path": dir, "max_bytes_per_token": 1 << 30,
	}}, kv.RoleWorker)
	require.NoError(t, err)
	kvData := bytes.Repeat([]byte{7}, 16<<20)
	for {
		require.NoError(t, c.SaveLayer(context.Background(), req, layers[0], bs, kvData))
	}
}

// savedLayer returns a connector on a directory of its own that has saved
// the first layer of req's first block, and the path of its file.
func savedLayer(t *testing.T) (*Connector, *recorder, string) {
	return savedLayerWith(t, nil)
}

// roomy are settings under which a layer of a block of a few tokens may
// be large: max_layer_bytes alone bounds it.
var roomy = map[string]any{"max_bytes_per_token": 1 << 30}

// savedLayerWith is savedLayer with settings besides the directory.
func savedLayerWith(t *testing.T, extra map[string]any) (*Connector, *recorder, string) {
	dir := t.TempDir()
	c, rec := openWith(t, dir, extra)
	require.NoError(t, c.SaveLayer(t.Context(), req, layers[0], bs, []byte("kv")))
	return c, rec, layerFile(t, dir, layers[0], bs)
}

// readTree returns the contents of the regular files under dir by path.
func readTree(t *testing.T, dir string) map[string]string {
	files := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		files[path] = string(data)
		return err
	}))
	return files
}

// Settings and layer names reach errors quoted: an escape sequence or a
// newline in them neither reaches a terminal raw nor forges a line.
func TestUserStringsAreQuotedInErrors(t *testing.T) {
	const evil = "\x1b[2J\nkvserver: forged error"
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	newWith := func(extra map[string]any) error {
		c, err := New(t.Context(), kv.Config{BlockSize: bs, Extra: extra}, kv.RoleWorker)
		if err == nil {
			c.Close()
		}
		return err
	}
	small, err := New(t.Context(), kv.Config{BlockSize: bs, Extra: map[string]any{
		"shared_storage_path": t.TempDir(), "max_layer_bytes": 1,
	}}, kv.RoleWorker)
	require.NoError(t, err)
	defer small.Close()
	for name, err := range map[string]error{
		"durability":    newWith(map[string]any{"shared_storage_path": t.TempDir(), "durability": evil}),
		"storage path":  newWith(map[string]any{"shared_storage_path": filepath.Join(file, evil)}),
		"layer name":    small.SaveLayer(t.Context(), req, evil, bs, []byte("too long")),
		"layer to load": func() error { _, err := small.LoadLayer(t.Context(), req, evil, bs-1); return err }(),
	} {
		require.Error(t, err, name)
		assert.NotContains(t, err.Error(), "\n", name)
		assert.NotContains(t, err.Error(), "\x1b", name)
		assert.Contains(t, err.Error(), `\x1b[2J\nkvserver: forged error"`, name)
	}
}

// A file or link at a layer's name that a load would refuse (a stranger's
// bytes, another layer's file, a link) neither reports the prefix stored
// when another layer is saved, nor keeps the save that replaces it from
// reporting the prefix once it does load.
func TestEventsFollowWhatLoads(t *testing.T) {
	ctx := t.Context()
	for _, plant := range []struct {
		name string
		at   func(t *testing.T, dir, path string)
	}{
		{"a stranger's bytes", func(t *testing.T, _, path string) {
			require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("x"), 4*headerLen), 0o644))
		}},
		{"another layer's file", func(t *testing.T, _, path string) {
			other, _ := open(t, t.TempDir())
			require.NoError(t, other.SaveLayer(ctx, req, layers[0], bs, []byte("layer 0 of a prefix")))
			data, err := os.ReadFile(layerFile(t, other.dir, layers[0], bs))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, data, 0o644))
		}},
		{"a dangling link", func(t *testing.T, _, path string) {
			require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "nothing"), path))
		}},
	} {
		t.Run(plant.name, func(t *testing.T) {
			dir := t.TempDir()
			c, _ := open(t, dir)
			var mu sync.Mutex
			var events []kv.KVEvent
			c.ReportEvents(func(e kv.KVEvent) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e)
			})
			planted := layerFile(t, dir, layers[1], bs)
			require.NoError(t, os.MkdirAll(filepath.Dir(planted), 0o755))
			plant.at(t, dir, planted)

			require.NoError(t, c.SaveLayer(ctx, req, layers[0], bs, []byte("layer 0")))
			_, err := c.LoadLayer(ctx, req, layers[1], bs)
			require.ErrorIs(t, err, kv.ErrMiss, "the planted layer does not load")
			assert.Empty(t, events, "a prefix whose other layer does not load was reported stored")

			require.NoError(t, c.SaveLayer(ctx, req, layers[1], bs, []byte("layer 1")))
			for _, l := range layers {
				_, err := c.LoadLayer(ctx, req, l, bs)
				require.NoError(t, err, l)
			}
			require.Len(t, events, 1, "the save that made the prefix load reports it")
			assert.Equal(t, kv.BlockStored, events[0].Kind)
		})
	}
}
