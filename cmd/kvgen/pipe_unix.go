//go:build unix

package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// isClosedPipe says whether err is a write's to a pipe with no reader.
func isClosedPipe(err error) bool { return errors.Is(err, syscall.EPIPE) }

// exitOnClosedPipe ends kvgen as SIGPIPE's default action ends a program
// whose output's reader went away (a shell says 141), as cat or grep end:
// kvgen ignores SIGPIPE to stop cleanly, and ends so once it has. With
// SIGPIPE's default action back, a write to the closed stdout is how the
// Go runtime lets a program end so.
func exitOnClosedPipe() {
	// Reset alone leaves an ignored signal ignored; handled first, it
	// gets its default action back.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	signal.Reset(syscall.SIGPIPE)
	os.Stdout.Write([]byte("\n"))
	os.Exit(exitError) // should the write not end kvgen
}
