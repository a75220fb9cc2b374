package inspect

import (
	"bytes"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"debug/plan9obj"
	"encoding/binary"
	"fmt"
	"io"
)

// maxHeaders bounds what the readers of a binary's headers (debug/elf,
// debug/macho, debug/pe, debug/buildinfo) may read of one file, together. They read
// what the headers claim, such as a section-name table of 2 GiB in a
// sparse file; a Go binary's headers, symbol tables included, are a few
// megabytes.
const maxHeaders = 32 << 20

// errHeaders is the error a reader gets past maxHeaders.
var errHeaders = fmt.Errorf("the file's headers claim more than the %d bytes inspect reads of them", maxHeaders)

// budgeted is a ReaderAt that reads at most a budget in all.
type budgeted struct {
	r    io.ReaderAt
	left int64
	// spent is set once a read was refused: whatever error a reader then
	// returns, such as debug/buildinfo's "unrecognized file format", the
	// reason is errHeaders.
	spent bool
}

func budget(r io.ReaderAt) *budgeted { return &budgeted{r: r, left: maxHeaders} }

func (b *budgeted) ReadAt(p []byte, off int64) (int, error) {
	if int64(len(p)) > b.left {
		b.spent = true
		return 0, errHeaders
	}
	b.left -= int64(len(p))
	return b.r.ReadAt(p, off)
}

// extent is a range of a file's bytes: [off, end).
type extent struct{ off, end int64 }

// loaded is where in a file the data a binary loads lies, and its format.
type loaded struct {
	format  string
	extents []extent
}

// why says why the bytes [off, off+n) are not linked data, or "" when
// they lie in one of the extents.
func (l loaded) why(off, n int64) string {
	for _, e := range l.extents {
		if off >= e.off && off+n <= e.end {
			return ""
		}
	}
	if len(l.extents) == 0 {
		return fmt.Sprintf("inspect cannot tell where %s binaries keep their data", l.format)
	}
	return fmt.Sprintf("it is not in the data the %s binary loads", l.format)
}

// loadedData returns where the data a binary loads lies in its file: for
// ELF, its loadable segments; for Mach-O, its segments but the link edit
// one (symbols, signature), in each architecture of a universal binary; for PE, its sections that are not discarded
// when it loads; for XCOFF and Plan 9, text and data. A format it does
// not know has no extents. (debug/buildinfo reads no other format.)
func loadedData(r io.ReaderAt) (loaded, error) {
	var ident [8]byte
	if _, err := r.ReadAt(ident[:], 0); err != nil {
		return loaded{}, err
	}
	var l loaded
	switch {
	case bytes.HasPrefix(ident[:], []byte(elf.ELFMAG)):
		l.format = "ELF"
		f, err := elf.NewFile(r)
		if err != nil {
			return l, err
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Filesz > 0 {
				l.add(p.Off, p.Filesz)
			}
		}
	case isMachO(ident[:4]):
		l.format = "Mach-O"
		f, err := macho.NewFile(r)
		if err != nil {
			return l, err
		}
		l.addSegments(f, 0)
	case bytes.HasPrefix(ident[:], []byte("\xca\xfe\xba\xbe")), bytes.HasPrefix(ident[:], []byte("\xca\xfe\xba\xbf")):
		// A universal binary: one Mach-O file per architecture, each at
		// its offset, as lipo makes them.
		l.format = "Mach-O"
		f, err := macho.NewFatFile(r)
		if err != nil {
			return l, err
		}
		for _, a := range f.Arches {
			l.addSegments(a.File, uint64(a.Offset))
		}
	case bytes.HasPrefix(ident[:], []byte("MZ")):
		l.format = "PE"
		f, err := pe.NewFile(r)
		if err != nil {
			return l, err
		}
		for _, s := range f.Sections {
			if s.Characteristics&pe.IMAGE_SCN_MEM_DISCARDABLE == 0 && s.Size > 0 {
				l.add(uint64(s.Offset), uint64(s.Size))
			}
		}
	case bytes.HasPrefix(ident[:], []byte{0x01, 0xf7}):
		l.format = "XCOFF"
		return l, l.xcoffData(r)
	default:
		l.format = "Plan 9"
		f, err := plan9obj.NewFile(r)
		if err != nil {
			l.format = "this format's"
			return l, nil
		}
		for _, s := range f.Sections {
			if s.Name == "text" || s.Name == "data" {
				l.add(uint64(s.Offset), uint64(s.Size))
			}
		}
	}
	return l, nil
}

// addSegments adds a Mach-O file's segments but the link edit one, the
// file starting at base.
func (l *loaded) addSegments(f *macho.File, base uint64) {
	for _, ld := range f.Loads {
		if s, ok := ld.(*macho.Segment); ok && s.Name != "__LINKEDIT" && s.Filesz > 0 {
			l.add(base+s.Offset, s.Filesz)
		}
	}
}

func (l *loaded) add(off, n uint64) {
	if off > 1<<62 || n > 1<<62 {
		return // no file is that large
	}
	l.extents = append(l.extents, extent{int64(off), int64(off + n)})
}

func isMachO(b []byte) bool {
	for _, m := range []uint32{macho.Magic32, macho.Magic64} {
		if binary.LittleEndian.Uint32(b) == m || binary.BigEndian.Uint32(b) == m {
			return true
		}
	}
	return false
}

// xcoffData finds a 64-bit XCOFF file's text and data sections: a 24-byte
// file header, an optional header, then section headers of 72 bytes, big
// endian (the format of aix/ppc64, the one XCOFF target Go has).
func (l *loaded) xcoffData(r io.ReaderAt) error {
	var fh [24]byte
	if _, err := r.ReadAt(fh[:], 0); err != nil {
		return err
	}
	be := binary.BigEndian
	nscns := int64(be.Uint16(fh[2:]))
	off := 24 + int64(be.Uint16(fh[16:]))
	for i := int64(0); i < nscns; i++ {
		var sh [72]byte
		if _, err := r.ReadAt(sh[:], off+72*i); err != nil {
			return err
		}
		const text, data = 0x20, 0x40
		if flags := be.Uint32(sh[64:]); flags&(text|data) != 0 {
			l.add(be.Uint64(sh[32:]), be.Uint64(sh[24:]))
		}
	}
	return nil
}
