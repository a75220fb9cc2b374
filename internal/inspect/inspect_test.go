package inspect

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// linked and foreign are descriptions this test binary links, as a
// registry's is linked: string data that a variable refers to. linked's
// module is the binary's; foreign's is none it was built with.
var linked, foreign = linkedDescription, foreignDescription

const (
	linkedDescription  = "\x00kvgen registry v1\x0000000156{\"manifest\":\"linked.yaml\",\"manifest_sha256\":\"2272bea616a05ae194c58b63752b39924a7beed67597c20dcb5586d1ee517290\",\"package\":\"github.com/kvgen/kvgen/internal/inspect\",\"connectors\":[{\"name\":\"memory\",\"roles\":[\"scheduler\",\"worker\"],\"import\":\"github.com/kvgen/kvgen/examples/connectors/memory\",\"constructor\":\"New\",\"module\":\"github.com/kvgen/kvgen\"}]}"
	foreignDescription = "\x00kvgen registry v1\x000000011c{\"manifest\":\"foreign.yaml\",\"manifest_sha256\":\"656771905e1ef731f65cd0a0d9fb061238380a1a012e6abdf846ecc7d2ea36fd\",\"package\":\"github.com/kvgen/kvgen/internal/inspect\",\"connectors\":[{\"name\":\"foreign\",\"import\":\"example.com/notlinked\",\"constructor\":\"New\",\"module\":\"example.com/notlinked\"}]}"
)

// joined joins parts when the test runs: the test binary's data, which a
// test inspects, holds no description but the two above.
func joined(parts ...string) []byte { return []byte(strings.Join(parts, "")) }

// scanBytes scans data as File scans a file.
func scanBytes(data []byte) []Description {
	found, _, _ := scan(context.Background(), bytes.NewReader(data), int64(len(data)))
	var ds []Description
	for _, f := range found {
		ds = append(ds, f.d)
	}
	return ds
}

// scan finds every description in a binary's bytes, however they are
// surrounded, across the chunks it reads, and passes over what only starts
// like one.
func TestScanFindsEveryDescription(t *testing.T) {
	a := Description{Manifest: "a.yaml", ManifestSHA256: SumManifest([]byte("a")), Entries: []Entry{{Name: "x", Import: "example.com/x", Constructor: "New", Roles: []string{"worker"}}}}
	b := Description{Manifest: "b.yaml", ManifestSHA256: SumManifest([]byte("b")), Entries: []Entry{}}
	ea, err := Encode(a)
	require.NoError(t, err)
	eb, err := Encode(b)
	require.NoError(t, err)
	var data bytes.Buffer
	data.WriteString("\x7fELF...")
	data.Write(joined(magic, "zzzzzzzz{}"))            // not a length
	data.Write(joined(magic, "000000ff{\"manifest\"")) // a length, then no JSON
	data.WriteString(ea)
	data.WriteString("padding")
	data.WriteString(eb)
	data.Write(joined(magic, "0000")) // cut short at the end
	got := scanBytes(data.Bytes())
	require.Len(t, got, 2)
	assert.Equal(t, a, got[0])
	assert.Equal(t, "b.yaml", got[1].Manifest)
	assert.Empty(t, scanBytes([]byte("no description here")))

	// A description across the end of a chunk, its magic or its length
	// split, is found whole.
	for _, at := range []int{scanChunk - 3, scanChunk + 2, scanChunk + header - 2, scanChunk - len(ea)/2} {
		data := make([]byte, at, at+len(ea))
		got := scanBytes(append(data, ea...))
		require.Len(t, got, 1, "at %d", at)
		assert.Equal(t, a, got[0])
	}
	// A length past the file, or past MaxDescription, is no description.
	assert.Empty(t, scanBytes(joined(magic, "7fffffff{}")))
}

// testBinary copies this test's executable, a Go binary that links
// linkedDescription, to a temporary file.
func testBinary(t *testing.T) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(exe)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.WriteFile(path, data, 0o755))
	require.True(t, strings.HasPrefix(linked, magic) && strings.HasPrefix(foreign, magic))
	return path
}

// allocated returns how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A binary's description is linked when it is in the data the binary
// loads and its modules are the binary's; one outside it, such as one
// appended to the file, or one whose modules the binary was not built
// with, is suspect, and shown quoted.
func TestAppendedDescriptionIsSuspect(t *testing.T) {
	path := testBinary(t)
	b, err := File(context.Background(), path)
	require.ErrorIs(t, err, ErrSuspect, "the foreign description's module is not the binary's")
	require.Len(t, b.Registries, 1)
	assert.Equal(t, "linked.yaml", b.Registries[0].Manifest)
	assert.Equal(t, "github.com/kvgen/kvgen", b.Registries[0].Entries[0].Module)
	require.Len(t, b.Suspect, 1)
	assert.Equal(t, "foreign.yaml", b.Suspect[0].Manifest)
	assert.Contains(t, b.Suspect[0].Reason, `its connector "foreign" is of module "example.com/notlinked", which the binary was not built with`)

	hostile := Description{
		Manifest: "x.yaml", ManifestSHA256: "00", Package: "evil\x1b[2J\x1b[H",
		Entries: []Entry{{Name: "\x1b[31mred\nkvgen: fake", Import: "example.com/e", Constructor: "New", Module: "github.com/kvgen/kvgen",
			Description: "\u202eevil\tdesc"}},
	}
	enc, err := Encode(hostile)
	require.NoError(t, err)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(enc)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	b, err = File(context.Background(), path)
	require.ErrorIs(t, err, ErrSuspect)
	require.Len(t, b.Registries, 1, "what is appended is not linked")
	require.Len(t, b.Suspect, 2)
	assert.Equal(t, hostile, b.Suspect[1].Description)
	assert.Contains(t, b.Suspect[1].Reason, "it is not in the data the")
	var out bytes.Buffer
	require.NoError(t, WriteText(&out, []*Binary{b}))
	assertPrintable(t, out.String())
	assert.Contains(t, out.String(), `suspect, not listed as linked: registry "evil\x1b[2J\x1b[H" from x.yaml`)
	assert.Contains(t, out.String(), `"\x1b[31mred\nkvgen: fake"`)
	assert.Contains(t, out.String(), `"\u202eevil\tdesc"`)
}

// The table has a column of descriptions when a connector of the registry
// has one, and none otherwise, as before descriptions were given.
func TestWriteTextDescriptions(t *testing.T) {
	entry := func(name, desc string) Entry {
		return Entry{Name: name, Import: "example.com/" + name, Constructor: "New", Module: "example.com", Description: desc}
	}
	text := func(entries ...Entry) string {
		var out bytes.Buffer
		b := &Binary{Path: "bin", GoVersion: "go1.26.0", Main: "example.com@(devel)", Registries: []Description{{Manifest: "c.yaml", Entries: entries}}}
		require.NoError(t, WriteText(&out, []*Binary{b}))
		return out.String()
	}
	out := text(entry("a", "Keeps KV in memory, for tests"), entry("b", ""))
	assert.Regexp(t, `(?m)^NAME\s+ROLES\s+CONSTRUCTOR\s+MODULE\s+SUM\s+DESCRIPTION$`, out)
	assert.Regexp(t, `(?m)^a\s+example.com/a.New\s+example.com\s+Keeps KV in memory, for tests$`, out)
	assert.Regexp(t, `(?m)^b\s+example.com/b.New\s+example.com\s*$`, out)
	out = text(entry("a", ""), entry("b", ""))
	assert.Regexp(t, `(?m)^NAME\s+ROLES\s+CONSTRUCTOR\s+MODULE\s+SUM$`, out)
	assert.NotContains(t, out, "DESCRIPTION")
}

// assertPrintable fails unless text is lines of printable text.
func assertPrintable(t testing.TB, text string) {
	t.Helper()
	require.True(t, utf8.ValidString(text), "%q", text)
	for _, r := range text {
		if r != '\n' && !strconv.IsPrint(r) {
			t.Fatalf("%q holds %U", text, r)
		}
	}
}

// inspect reads a file as a stream: a binary made 512 MiB by a sparse
// tail costs what the binary costs, not 512 MiB (it once allocated the
// file's size: 2.1 GB for one of 2 GiB).
func TestFileMemoryIsBoundedWhateverItsSize(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a 512 MiB file to its end: the full run covers it")
	}
	path := testBinary(t)
	const size = 512 << 20
	require.NoError(t, os.Truncate(path, size))
	var err error
	n := allocated(func() { _, err = File(context.Background(), path) })
	require.ErrorIs(t, err, ErrSuspect)
	t.Logf("allocated %d bytes to inspect a file of %d", n, size)
	assert.Less(t, n, uint64(64<<20))
}

// Headers that claim a section of 1.5 GiB, here the ELF section-name
// table in a sparse file, are an error, read no further than maxHeaders:
// debug/elf reads such a table whole, for debug/buildinfo too.
func TestHeadersClaimingGigabytesAreBounded(t *testing.T) {
	path := testBinary(t)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	if !bytes.HasPrefix(data, []byte(elf.ELFMAG)) || elf.Class(data[elf.EI_CLASS]) != elf.ELFCLASS64 || data[elf.EI_DATA] != byte(elf.ELFDATA2LSB) {
		t.Skip("the test binary is not a 64-bit little-endian ELF file")
	}
	le := binary.LittleEndian
	shoff, shentsize, shstrndx := le.Uint64(data[0x28:]), uint64(le.Uint16(data[0x3a:])), uint64(le.Uint16(data[0x3e:]))
	sh := shoff + shentsize*shstrndx
	le.PutUint64(data[sh+0x20:], 3<<29) // sh_size
	require.NoError(t, os.WriteFile(path, data, 0o755))
	require.NoError(t, os.Truncate(path, MaxSize))
	n := allocated(func() { _, err = File(context.Background(), path) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "headers claim more than")
	t.Logf("allocated %d bytes", n)
	assert.Less(t, n, uint64(128<<20))
}

// FuzzScan: any bytes scan without panicking into at most maxFound
// descriptions, each of which encodes again to itself and prints, linked
// or suspect, as lines of printable text.
func FuzzScan(f *testing.F) {
	a, _ := Encode(Description{Manifest: "a.yaml", Package: "example.com/a", Entries: []Entry{{Name: "x", Aliases: []string{"y"}, Roles: []string{"worker"}, Import: "example.com/x", Constructor: "New", Module: "example.com/x"}}})
	hostile, _ := Encode(Description{Manifest: "\u202e.yaml", Package: "evil\x1b[2J", Entries: []Entry{{Name: "\x1b[31m\nkvgen: fake", Sum: "\xff"}}})
	f.Add([]byte(a))
	f.Add([]byte(hostile))
	f.Add([]byte("\x7fELF" + a + hostile + a[:30]))
	f.Add(joined(magic, "00000002{}"))
	f.Add(joined(magic, "00000017{\"manifest\":\"\\u001b\\n\"}"))
	f.Add(joined(magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		found, passed, err := scan(context.Background(), bytes.NewReader(data), int64(len(data)))
		require.NoError(t, err)
		require.LessOrEqual(t, len(found), maxFound)
		require.GreaterOrEqual(t, passed, 0)
		for _, fd := range found {
			require.LessOrEqual(t, fd.length, int64(header+MaxDescription))
			enc, err := Encode(fd.d)
			require.NoError(t, err)
			again := scanBytes([]byte(enc))
			require.Len(t, again, 1)
			enc2, err := Encode(again[0])
			require.NoError(t, err)
			require.Equal(t, enc, enc2)
			var out bytes.Buffer
			b := &Binary{Path: "bin", Registries: []Description{fd.d}, Suspect: []Suspect{{Description: fd.d, Reason: "fuzz"}}}
			require.NoError(t, WriteText(&out, []*Binary{b}))
			assertPrintable(t, out.String())
		}
	})
}
