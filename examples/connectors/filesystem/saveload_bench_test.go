package filesystem

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvgen/kvgen/examples/connectors/internal/kvbench"
	"github.com/kvgen/kvgen/registry/kv"
)

// BenchmarkSaveLoad saves a request's 32 layers and loads them back,
// through the connector and through its floor in turn, every iteration:
// the floor writes each layer to a temporary file in the same prefix
// directory, renames it to the same layer file name the connector uses, and
// reads it back into a fresh buffer. "connector" loads with LoadLayer,
// "append" with AppendLayer into one buffer per request that is reused.
// sync=false pairs the floor with durability "none"; sync=true syncs each
// file before its rename in the floor, as durability "file" (the default)
// does. Each round ends by removing the layer files it wrote, untimed, so
// that only one side's files are held at once and every round writes new
// files alike.
func BenchmarkSaveLoad(b *testing.B) {
	names := kvbench.LayerNames()
	for _, synced := range []bool{false, true} {
		durability := map[bool]string{false: DurabilityNone, true: DurabilityFile}[synced]
		for _, c := range kvbench.Cases() {
			if synced && len(c.Requests) > 1 {
				continue // the disk's flushes, not the connector, set the pace
			}
			b.Run(fmt.Sprintf("sync=%t/%s", synced, c.Name), func(b *testing.B) {
				floorDirs := prefixDirs(b, b.TempDir(), c.Requests, true)
				floor := kvbench.Side{Name: "floor", Start: func() (func(int) error, func()) {
					return func(i int) error {
						for _, l := range names {
							if err := floorWrite(floorDirs[i], fileName(l), c.KV, synced); err != nil {
								return err
							}
						}
						for _, l := range names {
							got, err := os.ReadFile(filepath.Join(floorDirs[i], fileName(l)))
							if err != nil {
								return err
							}
							kvbench.Use(got)
						}
						return nil
					}, func() { removeLayers(b, floorDirs, names) }
				}}
				dir := b.TempDir()
				conn := benchConnector(b, dir, names, durability)
				dirs := prefixDirs(b, dir, c.Requests, false)
				sides := kvbench.WorkerSides(c,
					func() kv.Worker { return conn },
					func(kv.Worker) { removeLayers(b, dirs, names) })
				kvbench.Pair(b, c, append([]kvbench.Side{floor}, sides...)...)
			})
		}
	}
}

func benchConnector(b *testing.B, dir string, names []string, durability string) *Connector {
	c, err := New(context.Background(), kv.Config{
		BlockSize:  kvbench.BlockSize,
		LayerNames: names,
		Extra:      map[string]any{"shared_storage_path": dir, "durability": durability},
	}, kv.RoleWorker)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// prefixDirs returns the prefix directories of reqs under dir, made if
// mkdir is set.
func prefixDirs(b *testing.B, dir string, reqs []*kv.Request, mkdir bool) []string {
	prefixes, err := kv.NewPrefixes("", kvbench.BlockSize)
	if err != nil {
		b.Fatal(err)
	}
	dirs := make([]string, len(reqs))
	for i, req := range reqs {
		h, err := prefixes.Hash(req.PromptTokens, kvbench.PromptTokens)
		if err != nil {
			b.Fatal(err)
		}
		dirs[i] = filepath.Join(dir, h.String())
		if mkdir {
			if err := os.Mkdir(dirs[i], 0o755); err != nil {
				b.Fatal(err)
			}
		}
	}
	return dirs
}

// removeLayers removes the layer files in dirs.
func removeLayers(b *testing.B, dirs, names []string) {
	for _, d := range dirs {
		for _, l := range names {
			if err := os.Remove(filepath.Join(d, fileName(l))); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// floorWrite writes kv to dir/name through a temporary file and a rename,
// syncing the file first if synced: what any atomic file write costs.
func floorWrite(dir, name string, kvData []byte, synced bool) error {
	f, err := os.CreateTemp(dir, ".floor-*")
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(kvData); err != nil {
		return err
	}
	if synced {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// BenchmarkChecksum compares checksums a layer file could carry over its
// KV bytes: the SHA-256 of format version 1, CRC-32C (Castagnoli), which
// amd64 computes with its CRC32 instruction, and CRC-32 (IEEE), which Go
// computes with carry-less multiplication, the one version 2 carries.
func BenchmarkChecksum(b *testing.B) {
	sums := []struct {
		name string
		sum  func([]byte) uint32
	}{
		{"sha256", func(p []byte) uint32 { h := sha256.Sum256(p); return uint32(h[0]) }},
		{"crc32c", func(p []byte) uint32 { return crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)) }},
		{"crc32", crc32.ChecksumIEEE},
	}
	for _, size := range kvbench.Sizes {
		kvData := kvbench.Payload(size.Bytes)
		for _, sum := range sums {
			b.Run("size="+size.Name+"/sum="+sum.name, func(b *testing.B) {
				b.SetBytes(int64(len(kvData)))
				for b.Loop() {
					crcSink = sum.sum(kvData)
				}
			})
		}
	}
}

var crcSink uint32
