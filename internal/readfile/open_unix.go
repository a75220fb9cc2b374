//go:build unix

package readfile

import (
	"os"
	"syscall"
)

// openNonBlocking opens path without waiting for a writer, should it be a
// FIFO; for a regular file the flag changes nothing.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// openInNonBlocking is openNonBlocking of name inside root.
func openInNonBlocking(root *os.Root, name string) (*os.File, error) {
	return root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
