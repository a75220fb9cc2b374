package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInvocation(t *testing.T) {
	const (
		cached = "/home/u/.cache/go-build/42/4224bc5fa8d2d24bec9aaa67b6c8dc137406ac0e496cffb651327da2e838e6f2-d/kvgen"
		work   = "/tmp/go-build1425449372/b001/exe/kvgen"
	)
	for _, tc := range []struct {
		name         string
		argv, parent []string
		want         string
	}{
		{"installed", []string{"/home/u/go/bin/kvgen", "check"}, []string{"bash"}, "kvgen"},
		{"by its name", []string{"kvgen"}, nil, "kvgen"},
		{"renamed", []string{"./bin/kvgen-1.2", "-h"}, nil, "kvgen-1.2"},
		{"go tool", []string{cached, "check"}, []string{"/usr/local/go/bin/go", "tool", "kvgen", "check"}, "go tool kvgen"},
		{"go tool, first run", []string{work, "-h"}, []string{"go", "tool", "kvgen", "-h"}, "go tool kvgen"},
		{"go tool by path", []string{cached}, []string{"go", "tool", "github.com/kvgen/kvgen/cmd/kvgen"}, "go tool github.com/kvgen/kvgen/cmd/kvgen"},
		{"go run", []string{cached, "list"}, []string{"go", "run", "-race", "./cmd/kvgen", "list"}, "go run -race ./cmd/kvgen"},
		{"quoted", []string{cached}, []string{"go", "run", "-ldflags", "-s -w", "./cmd/kvgen"}, "go run -ldflags '-s -w' ./cmd/kvgen"},
		// Where the parent is unknown or is not the go command that ran
		// kvgen, the documented way is the best guess.
		{"parent unknown", []string{cached, "check"}, nil, "go tool kvgen"},
		{"parent not go", []string{cached, "check"}, []string{"make", "check"}, "go tool kvgen"},
		{"parent's arguments differ", []string{cached, "check"}, []string{"go", "tool", "kvgen", "list"}, "go tool kvgen"},
		{"not a cache entry", []string{"/srv/42/notahash-d/kvgen"}, []string{"go", "run", "x"}, "kvgen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, invocation(tc.argv, tc.parent))
		})
	}
}
