//go:build !unix

package readfile

import "os"

func openNonBlocking(path string) (*os.File, error) { return os.Open(path) }

func openInNonBlocking(root *os.Root, name string) (*os.File, error) { return root.Open(name) }
