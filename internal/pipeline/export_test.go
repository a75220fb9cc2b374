package pipeline

import (
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/load"
)

// ThroughLoader makes opts load every connector through the loader
// package, as a list of patterns too long for one go list run is.
func ThroughLoader(opts Options) Options {
	opts.loaderAbove = 1
	return opts
}

// Loads is how many runs have loaded packages so far, in this process.
func Loads() int64 { return loads.Load() }

// ListRuns is how many go list runs have listed packages so far, in this
// process.
func ListRuns() int64 { return load.ListRuns() }

// DepsRuns is how many of those listed every dependency as well.
func DepsRuns() int64 { return load.DepsRuns() }

// Write writes r's file as Update does, without linking modules first.
func (r *Result) Write() (bool, error) { return r.write() }

// GoEnvRuns is how many go env runs have answered so far, in this process.
func GoEnvRuns() int64 { return gocmd.EnvRuns() }
