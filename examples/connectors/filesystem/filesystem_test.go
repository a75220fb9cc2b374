package filesystem

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/conformance"
	"github.com/kvgen/kvgen/registry/kv"
)

func TestConformance(t *testing.T) {
	factory := func(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
		return New(ctx, cfg, role)
	}
	conformance.Run(t, factory, conformance.Options{
		Extra: func(t testing.TB) map[string]any {
			return map[string]any{"shared_storage_path": t.TempDir()}
		},
		// A bit flipped in the last byte of the layer's file, as a bad
		// disk would.
		Damage: func(t testing.TB, extra map[string]any, prefix kv.BlockHash, layer string) {
			path := filepath.Join(extra["shared_storage_path"].(string), prefix.String(), fileName(layer))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			b[len(b)-1] ^= 1
			require.NoError(t, os.WriteFile(path, b, 0o644))
		},
	})
}

const bs = 4

var layers = []string{"model.layers.0.self_attn", "model.layers.1.self_attn"}

// recorder is a slog.Handler that keeps the records it is given.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// warnings returns the "file" attribute of every warning, and forgets them.
func (r *recorder) warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var files []string
	for _, rec := range r.records {
		if rec.Level != slog.LevelWarn {
			continue
		}
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "file" {
				files = append(files, a.Value.String())
			}
			return true
		})
	}
	r.records = nil
	return files
}

// open creates a connector on dir that logs to a recorder.
func open(t *testing.T, dir string) (*Connector, *recorder) {
	t.Helper()
	return openWith(t, dir, nil)
}

// openWith is open with settings besides the directory.
func openWith(t *testing.T, dir string, extra map[string]any) (*Connector, *recorder) {
	t.Helper()
	settings := map[string]any{"shared_storage_path": dir}
	maps.Copy(settings, extra)
	c, err := New(t.Context(), kv.Config{
		BlockSize:  bs,
		LayerNames: layers,
		Extra:      settings,
	}, kv.RoleWorker)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	rec := &recorder{}
	c.Logger = slog.New(rec)
	return c, rec
}

var req = &kv.Request{ID: "r", PromptTokens: []uint32{10, 11, 12, 13, 14, 15, 16, 17, 18}}

// layerFile is where the layer of the first numTokens tokens of req is kept.
func layerFile(t *testing.T, dir, layer string, numTokens int) string {
	p, err := kv.NewPrefixes("", bs)
	require.NoError(t, err)
	h, err := p.Hash(req.PromptTokens, numTokens)
	require.NoError(t, err)
	return filepath.Join(dir, h.String(), fileName(layer))
}

func TestLayout(t *testing.T) {
	dir := t.TempDir()
	c, _ := open(t, dir)
	require.NoError(t, c.SaveLayer(t.Context(), req, layers[0], 2*bs, []byte("kv")))
	path := layerFile(t, dir, layers[0], 2*bs)
	assert.Equal(t, "model.layers.0.self_attn.kv", filepath.Base(path))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Len(t, data, headerLen+2)
	assert.Equal(t, "kv", string(data[headerLen:]))
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")
}

func TestDamagedFileIsAMiss(t *testing.T) {
	kvData := bytes.Repeat([]byte("0123456789abcdef"), 64)
	other := bytes.Repeat([]byte("fedcba9876543210"), 64)
	flip := func(i int) func([]byte) []byte {
		return func(b []byte) []byte { b[i] ^= 0x20; return b }
	}
	damages := map[string]func([]byte) []byte{
		"empty":            func([]byte) []byte { return nil },
		"truncated header": func(b []byte) []byte { return b[:headerLen-1] },
		"truncated magic":  func(b []byte) []byte { return b[:3] },
		"truncated kv":     func(b []byte) []byte { return b[:len(b)-1] },
		"extra bytes":      func(b []byte) []byte { return append(b, 0) },
		"garbage": func([]byte) []byte {
			return []byte("this is not KV at all, but it is long enough to hold a header of eighty-four bytes")
		},
	}
	for i := range headerLen {
		damages["header byte "+strconv.Itoa(i)] = flip(i)
	}
	for _, i := range []int{0, len(kvData) / 2, len(kvData) - 1} {
		damages["kv byte "+strconv.Itoa(i)] = flip(headerLen + i)
	}

	ctx := t.Context()
	dir := t.TempDir()
	c, rec := open(t, dir)
	path := layerFile(t, dir, layers[0], 2*bs)
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, c.SaveLayer(ctx, req, layers[0], 2*bs, kvData))
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, damage(data), 0o600))

			got, err := c.LoadLayer(ctx, req, layers[0], 2*bs)
			require.ErrorIs(t, err, kv.ErrMiss)
			assert.ErrorContains(t, err, path)
			assert.Nil(t, got)
			assert.Equal(t, []string{path}, rec.warnings(), "one warning naming the file")

			// The next save replaces the damaged file.
			require.NoError(t, c.SaveLayer(ctx, req, layers[0], 2*bs, other))
			got, err = c.LoadLayer(ctx, req, layers[0], 2*bs)
			require.NoError(t, err)
			assert.Equal(t, other, got)
		})
	}
}

// A file moved to another layer's place is not taken for that layer.
func TestForeignFileIsAMiss(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	c, rec := open(t, dir)
	require.NoError(t, c.SaveLayer(ctx, req, layers[0], bs, []byte("layer 0")))
	require.NoError(t, c.SaveLayer(ctx, req, layers[1], bs, []byte("layer 1")))
	require.NoError(t, c.SaveLayer(ctx, req, layers[0], 2*bs, []byte("longer")))
	moves := [][2]string{
		{layerFile(t, dir, layers[1], bs), layerFile(t, dir, layers[0], bs)},
		{layerFile(t, dir, layers[0], 2*bs), layerFile(t, dir, layers[1], 2*bs)},
	}
	for _, m := range moves {
		require.NoError(t, os.Rename(m[0], m[1]))
	}
	_, err := c.LoadLayer(ctx, req, layers[0], bs)
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.ErrorContains(t, err, "another prefix or layer")
	_, err = c.LoadLayer(ctx, req, layers[1], 2*bs)
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.Equal(t, []string{moves[0][1], moves[1][1]}, rec.warnings())
}

func TestMissingFileIsAQuietMiss(t *testing.T) {
	c, rec := open(t, t.TempDir())
	_, err := c.LoadLayer(t.Context(), req, layers[0], bs)
	require.ErrorIs(t, err, kv.ErrMiss)
	assert.Empty(t, rec.warnings())
}

// Two connectors on one directory behave like two processes sharing it.
func TestInstancesShareDirectory(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	a, _ := open(t, dir)
	b, _ := open(t, dir)
	for _, l := range layers {
		require.NoError(t, a.SaveLayer(ctx, req, l, 2*bs, []byte("from a: "+l)))
	}
	n, err := b.MatchedTokens(ctx, req, 0)
	require.NoError(t, err)
	assert.Equal(t, 2*bs, n)
	got, err := b.LoadLayer(ctx, req, layers[1], 2*bs)
	require.NoError(t, err)
	assert.Equal(t, "from a: "+layers[1], string(got))

	require.NoError(t, b.SaveLayer(ctx, req, layers[1], 2*bs, []byte("from b")))
	got, err = a.LoadLayer(ctx, req, layers[1], 2*bs)
	require.NoError(t, err)
	assert.Equal(t, "from b", string(got), "a save replaces the other connector's file")
}

func TestMatchedTokensWithoutLayerNames(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	c, err := New(ctx, kv.Config{BlockSize: bs, Extra: map[string]any{"shared_storage_path": dir}}, kv.RoleScheduler)
	require.NoError(t, err)
	w, _ := open(t, dir)
	n, err := c.MatchedTokens(ctx, req, 0)
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, w.SaveLayer(ctx, req, "any layer", bs, []byte("kv")))
	n, err = c.MatchedTokens(ctx, req, 0)
	require.NoError(t, err)
	assert.Equal(t, bs, n, "with no layers configured, one stored layer matches")
}

func TestMissingDirectoryIsCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	c, _ := open(t, dir)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	require.NoError(t, c.SaveLayer(t.Context(), req, layers[0], bs, []byte("kv")))
}

func TestSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, c := range []struct {
		name  string
		extra map[string]any
		error string
	}{
		{"missing path", nil, "shared_storage_path is required"},
		{"empty path", map[string]any{"shared_storage_path": ""}, "shared_storage_path is required"},
		{"path is a file", map[string]any{"shared_storage_path": file}, "shared_storage_path"},
		{"misspelt", map[string]any{"shared_storage": "x"}, `did you mean "shared_storage_path"`},
		{"unknown durability", map[string]any{"shared_storage_path": t.TempDir(), "durability": "fsync"}, `durability "fsync": want "none", "file" or "full"`},
		{"zero grace", map[string]any{"shared_storage_path": t.TempDir(), "stale_temp_seconds": 0}, "stale_temp_seconds 0: want from 1 to 31536000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := New(t.Context(), kv.Config{BlockSize: bs, Extra: c.extra}, kv.RoleWorker)
			assert.Nil(t, conn)
			assert.ErrorContains(t, err, c.error)
		})
	}
}

func TestBlockSizeOutOfRange(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kv")
	for _, bs := range []int{0, -16, kv.MaxBlockSize + 1, math.MaxInt} {
		conn, err := New(t.Context(), kv.Config{BlockSize: bs, Extra: map[string]any{"shared_storage_path": dir}}, kv.RoleWorker)
		assert.Nil(t, conn)
		assert.EqualError(t, err, fmt.Sprintf("block size %d: want a number of tokens from 1 to 65536", bs))
	}
	assert.NoDirExists(t, dir, "nothing is created for a config that is rejected")
}

func TestAnyLayerNameIsAFileName(t *testing.T) {
	names := []string{
		"model.layers.0.self_attn", "a/b", "../escape", ".", "..", ".hidden",
		"Upper", "upper", "with space", "ünïcödé", "nul\x00byte", "100%",
		strings.Repeat("x", 300), strings.Repeat("x", 299) + "y",
	}
	ctx := t.Context()
	dir := t.TempDir()
	c, _ := open(t, dir)
	for _, l := range names {
		require.NoError(t, c.SaveLayer(ctx, req, l, bs, []byte(l)), "layer %q", l)
	}
	for _, l := range names {
		got, err := c.LoadLayer(ctx, req, l, bs)
		require.NoError(t, err, "layer %q", l)
		assert.Equal(t, l, string(got), "layer %q", l)
	}
	entries, err := os.ReadDir(filepath.Dir(layerFile(t, dir, "", bs)))
	require.NoError(t, err)
	assert.Len(t, entries, len(names), "one file per layer, each in the prefix's directory")
	for _, e := range entries {
		assert.True(t, e.Type().IsRegular(), e.Name())
		assert.LessOrEqual(t, len(e.Name()), 255, e.Name())
		assert.Equal(t, strings.ToLower(e.Name()), e.Name(), "names are lower case")
		assert.True(t, isLayerFile(e.Name()), e.Name())
	}
}

func TestEmptyLayerNameRejected(t *testing.T) {
	c, _ := open(t, t.TempDir())
	assert.Error(t, c.SaveLayer(t.Context(), req, "", bs, []byte("kv")))
}

// Every durability saves and loads the same; what differs is what a crash
// of the machine can take (see the package doc).
func TestDurabilities(t *testing.T) {
	for _, d := range []string{DurabilityNone, DurabilityFile, DurabilityFull} {
		t.Run(d, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			c, err := New(ctx, kv.Config{BlockSize: bs, Extra: map[string]any{
				"shared_storage_path": dir, "durability": d,
			}}, kv.RoleWorker)
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SaveLayer(ctx, req, layers[0], bs, []byte("kv "+d)))
			got, err := c.LoadLayer(ctx, req, layers[0], bs)
			require.NoError(t, err)
			assert.Equal(t, "kv "+d, string(got))
			entries, err := os.ReadDir(filepath.Dir(layerFile(t, dir, layers[0], bs)))
			require.NoError(t, err)
			assert.Len(t, entries, 1, "no temporary file is left behind")
		})
	}
}

// TestWarningsReachTheHostsLogger creates the connector as a host does,
// through a registry given the host's logger: a damaged file's warning goes
// there, naming the connector, and not to slog.Default.
func TestWarningsReachTheHostsLogger(t *testing.T) {
	var host, dflt bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&dflt, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	dir := t.TempDir()
	reg := kv.MustNew(kv.Entry{Name: "filesystem", Factory: kv.Adapt(New)}).
		WithLogger(slog.New(slog.NewTextHandler(&host, nil)))
	w, err := reg.CreateWorker(t.Context(), kv.Config{
		Connector: "filesystem", BlockSize: bs, LayerNames: layers,
		Extra: map[string]any{"shared_storage_path": dir},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, w.Close()) })

	require.NoError(t, w.SaveLayer(t.Context(), req, layers[0], 2*bs, []byte("kv")))
	path := layerFile(t, dir, layers[0], 2*bs)
	require.NoError(t, os.WriteFile(path, []byte("not ours"), 0o644))
	_, err = w.LoadLayer(t.Context(), req, layers[0], 2*bs)
	require.ErrorIs(t, err, kv.ErrMiss)

	assert.Contains(t, host.String(), "level=WARN")
	assert.Contains(t, host.String(), "connector=filesystem role=worker")
	assert.Contains(t, host.String(), "file="+path)
	assert.Empty(t, dflt.String(), "nothing goes to slog.Default")
}
