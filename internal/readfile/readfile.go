// Package readfile reads the files kvgen reads itself (go.mod, go.sum, Go
// source, the registry file it wrote before) as files, not as whatever
// stands in their place: only a regular file is read, never more than a
// bound, and it is opened so that a FIFO cannot block kvgen. A link to
// /dev/zero or a FIFO named go.mod is then an error, not a run that never
// ends or that reads until memory runs out.
package readfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kvgen/kvgen/internal/suggest"
)

// Max bounds every file kvgen reads through this package: far larger than
// any go.mod, go.sum or Go source file that is meant to be one.
const Max = 64 << 20

// NotRegularError is a path that names something other than a regular
// file: a directory, a FIFO, a device, a socket.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file but %s; kvgen reads only files", suggest.QuotePath(e.Path), kind(e.Mode))
}

// TooLargeError is a file larger than the bound it was read with.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes, more than kvgen reads of such a file: is it the right file?", suggest.QuotePath(e.Path), e.Limit)
}

// kind names a file mode's type as a message shows it.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "not a file"
}

// Open opens path, following symbolic links, for reading, if it is a
// regular file: the file that was opened is the one checked, so nothing
// swapped in between a check and the open is read.
func Open(path string) (*os.File, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, err
	}
	return regular(f, path)
}

// OpenIn is Open of name inside root: a link may lead elsewhere in root,
// never out of it.
func OpenIn(root *os.Root, name string) (*os.File, error) {
	f, err := openInNonBlocking(root, name)
	if err != nil {
		return nil, err
	}
	return regular(f, filepath.Join(root.Name(), name))
}

// regular returns f if it is a regular file, and closes it if not.
func regular(f *os.File, path string) (*os.File, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Path: path, Mode: fi.Mode()}
	}
	return f, nil
}

// Read returns the content of the regular file at path, of at most limit
// bytes; a larger file is a *TooLargeError.
func Read(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	return readAll(f, path, limit)
}

// ReadIn is Read of name inside root, opened as OpenIn opens it.
func ReadIn(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := OpenIn(root, name)
	if err != nil {
		return nil, err
	}
	return readAll(f, filepath.Join(root.Name(), name), limit)
}

// readAll reads and closes f, the file at path.
func readAll(f *os.File, path string, limit int64) ([]byte, error) {
	defer f.Close()
	// A file larger than the bound is refused unread; one that grows
	// while it is read is cut at the bound below.
	if fi, err := f.Stat(); err == nil && fi.Size() > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return data, nil
}

// ReadIfExists is Read, returning nil and no error when nothing is at
// path.
func ReadIfExists(path string, limit int64) ([]byte, error) {
	data, err := Read(path, limit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}
