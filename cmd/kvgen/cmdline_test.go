package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandLine reads flags before the command with that command's flags:
// every command must stop at parse, before doing anything, when asked.
func TestFlagsOfEveryCommand(t *testing.T) {
	for _, c := range commands() {
		fs := flagsOf(c)
		require.NotNil(t, fs, c.name)
		assert.Equal(t, c.name, commandOf(fs))
	}
}

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		name string
		rest []string
	}{
		{nil, "generate", nil},
		{[]string{"check", "-json"}, "check", []string{"-json"}},
		{[]string{"-json", "list"}, "list", []string{"-json"}},
		{[]string{"-manifest", "connectors.yaml", "check", "-o", "x.go"}, "check", []string{"-manifest", "connectors.yaml", "-o", "x.go"}},
		{[]string{"-json", "inspect", "bin/"}, "inspect", []string{"-json", "bin/"}},
		// -manifest takes a value, -json does not: list is the manifest.
		{[]string{"-manifest", "list"}, "generate", []string{"-manifest", "list"}},
		{[]string{"-json", "-manifest", "list", "list"}, "list", []string{"-json", "-manifest", "list"}},
		{[]string{"-mod=readonly"}, "generate", []string{"-mod=readonly"}},
		// A word near a command is a misspelt one; another is generate's
		// stray argument.
		{[]string{"-json", "lsit"}, "lsit", nil},
		{[]string{"-json", "frobnicate"}, "generate", []string{"-json", "frobnicate"}},
	} {
		name, rest := commandLine(tc.args)
		assert.Equal(t, tc.name, name, "%q", tc.args)
		assert.Equal(t, tc.rest, rest, "%q", tc.args)
	}
}
