package kv_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// oneBufferHashes is how block hashes were computed before the hashing
// buffer was bounded: one buffer of 32+4*blockSize bytes, allocated before
// the prompt's length was looked at.
func oneBufferHashes(tokens []uint32, blockSize int) []kv.BlockHash {
	n := len(tokens) / blockSize
	out := make([]kv.BlockHash, n)
	buf := make([]byte, sha256.Size+4*blockSize)
	var parent [sha256.Size]byte
	for i := range n {
		copy(buf, parent[:])
		b := buf[sha256.Size:]
		for j, t := range tokens[i*blockSize : (i+1)*blockSize] {
			binary.LittleEndian.PutUint32(b[4*j:], t)
		}
		parent = sha256.Sum256(buf)
		out[i] = parent
	}
	return out
}

var hashSink []kv.BlockHash

// BenchmarkHashes compares Prefixes.Hashes with the one-buffer version it
// replaced. Each iteration runs both, one after the other, so they share
// the machine's load; the ratio is streaming over one-buffer time.
func BenchmarkHashes(b *testing.B) {
	for _, c := range []struct{ prompt, blockSize int }{{4096, 16}, {4096, 256}, {32768, 16}} {
		b.Run(fmt.Sprintf("prompt=%d/block=%d", c.prompt, c.blockSize), func(b *testing.B) {
			p, err := kv.NewPrefixes("", c.blockSize)
			if err != nil {
				b.Fatal(err)
			}
			prompt := tokens(c.prompt)
			if fmt.Sprint(p.Hashes(prompt)) != fmt.Sprint(oneBufferHashes(prompt, c.blockSize)) {
				b.Fatal("the two versions disagree")
			}
			var streaming, oneBuffer time.Duration
			for b.Loop() {
				start := time.Now()
				hashSink = p.Hashes(prompt)
				mid := time.Now()
				hashSink = oneBufferHashes(prompt, c.blockSize)
				streaming += mid.Sub(start)
				oneBuffer += time.Since(mid)
			}
			b.ReportMetric(float64(streaming.Nanoseconds())/float64(b.N), "streaming-ns/op")
			b.ReportMetric(float64(oneBuffer.Nanoseconds())/float64(b.N), "one-buffer-ns/op")
			b.ReportMetric(float64(streaming)/float64(oneBuffer), "ratio")
		})
	}
}
