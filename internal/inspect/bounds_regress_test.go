package inspect

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A description's JSON may be up to MaxDescription bytes, but what it
// decodes into must not be many times that: "{}" is three bytes of JSON
// and an Entry of about 200 bytes, so 8 MiB of empty connectors once
// decoded into 1.9 GB, and four such descriptions appended to a binary ran
// kvgen inspect out of memory.
func TestDescriptionOfManyEmptyConnectorsIsBounded(t *testing.T) {
	const n = 350_000 // about 1 MiB of JSON
	js := `{"manifest":"x","connectors":[` + strings.Repeat("{},", n-1) + `{}]}`
	data := joined(magic, fmt.Sprintf("%0*x", lengthDigits, len(js)), js)
	var got []Description
	allocs := allocated(func() { got = scanBytes(data) })
	t.Logf("allocated %d bytes to scan %d bytes", allocs, len(data))
	assert.LessOrEqual(t, len(got), 1)
	assert.Less(t, allocs, uint64(64<<20), "a description of %d bytes allocated %d", len(data), allocs)
}

// A magic followed by a length that fits in the file, then no JSON, is
// passed over; but the scan read the whole claimed length for each, and
// then moved on by only the magic's length, so every 28 bytes of a file
// cost a read of up to 8 MiB: 2,000 of them (56 KB) appended to a binary
// took kvgen inspect 17 s, and the 2 GiB inspect accepts hold 76 million.
// What the scan reads must stay in proportion to the file.
func TestMagicsClaimingLengthsDoNotMultiplyReads(t *testing.T) {
	var data bytes.Buffer
	for range 50 {
		data.Write(joined(magic, "00800000"))
	}
	data.Write(make([]byte, 8<<20))
	r := &countingReader{r: bytes.NewReader(data.Bytes())}
	scan(context.Background(), r, int64(data.Len()))
	t.Logf("read %d bytes to scan %d", r.n.Load(), data.Len())
	assert.Less(t, r.n.Load(), int64(4*data.Len()))
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// A stop ends a scan within a chunk: inspect of a file of many would-be
// descriptions once ran on for minutes after SIGTERM.
func TestScanStopsWhenAsked(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	data := joined(magic, "00000010", strings.Repeat("x", 3<<20))
	_, _, err := scan(ctx, bytes.NewReader(data), int64(len(data)))
	assert.ErrorIs(t, err, context.Canceled)
}
