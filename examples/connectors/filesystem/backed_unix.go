//go:build unix

package filesystem

import (
	"io/fs"
	"syscall"
)

// backed reports whether the blocks the file system holds for a file cover
// its size: false for a sparse file, or one a compressing file system
// stores in fewer blocks. Where the blocks are not known it says true.
func backed(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int64(st.Blocks)*512 >= fi.Size()
}
