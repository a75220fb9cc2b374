//go:build !unix

package readfile

import "os"

func openNonBlocking(path string) (*os.File, error) { return os.Open(path) }
