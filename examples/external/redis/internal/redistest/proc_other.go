//go:build !linux

package redistest

import "os/exec"

// dieWithParent does nothing where the kernel cannot kill a child with its
// parent; t.Cleanup still stops the servers of a test that ends normally.
func dieWithParent(*exec.Cmd) {}
