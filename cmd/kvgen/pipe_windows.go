package main

import (
	"errors"
	"os"
	"syscall"
)

// errorNoData is ERROR_NO_DATA, "the pipe is being closed", what a write
// to a pipe whose reader went away fails with.
const errorNoData = syscall.Errno(232)

// isClosedPipe says whether err is a write's to a pipe with no reader.
func isClosedPipe(err error) bool {
	return errors.Is(err, errorNoData) || errors.Is(err, syscall.ERROR_BROKEN_PIPE) || errors.Is(err, syscall.EPIPE)
}

// exitOnClosedPipe ends kvgen, quietly, once its output's reader went
// away: Windows has no SIGPIPE to end it with, so it exits 1.
func exitOnClosedPipe() { os.Exit(exitError) }
