package load

import (
	"fmt"
	"regexp"
	"strings"
)

// Std reports whether importPath is a standard-library package's, as the
// go command and gofmt's import groups tell: its first element has no dot.
func Std(importPath string) bool {
	first, _, _ := strings.Cut(importPath, "/")
	return !strings.Contains(first, ".")
}

// InModule reports whether importPath is a package path of module modPath.
func InModule(importPath, modPath string) bool {
	return importPath == modPath || strings.HasPrefix(importPath, modPath+"/")
}

// ModuleOf returns the module of mods that importPath is in, the longest
// when modules nest, or "". A path that goes on with a major version
// element, example.com/kv/v2/..., is taken to be in that major version's
// module, not in example.com/kv.
func ModuleOf(importPath string, mods []string) string {
	best := ""
	for _, m := range mods {
		if !InModule(importPath, m) || len(m) <= len(best) {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(importPath[len(m):], "/"), "/")
		if majorElem.MatchString(first) {
			continue
		}
		best = m
	}
	return best
}

// majorElem is a major version suffix of a module path: v2 and up.
var majorElem = regexp.MustCompile(`^v([2-9]|[1-9][0-9]+)$`)

// IsMajorElem reports whether elem, an element of a module path, is a
// major version suffix: v2 and up.
func IsMajorElem(elem string) bool { return majorElem.MatchString(elem) }

// NotCachedError is a module version the go command needed and could not
// download, for GOPROXY=off, because the module cache lacks it.
type NotCachedError struct {
	// Module is its path, and Version its version, or "" when the go
	// command looked for the module of a package.
	Module, Version string
}

func (e *NotCachedError) Error() string {
	mv := e.Module
	if e.Version != "" {
		mv += "@" + e.Version
	}
	return fmt.Sprintf("%s is not in the module cache, and GOPROXY=off forbids downloading it; name a version the module cache has, or download it once with a module proxy at hand: go mod download %s", mv, mv)
}

// notCached returns, when msg, the go command's words of a package of
// module mod, which go.mod requires at version, says that GOPROXY=off
// kept it from looking the module up, a *NotCachedError naming the
// module version msg names, else mod at version; otherwise nil.
func notCached(msg, mod, version string) error {
	nc := LookupDisabled(msg)
	if nc == nil {
		// The go command's words of the package itself, its module
		// unnamed; a dependency's name their own module.
		if strings.TrimSpace(msg) != lookupDisabledWords || mod == "" {
			return nil
		}
		nc = &NotCachedError{Module: mod}
	}
	if nc.Module == mod && nc.Version == "" {
		nc.Version = version
	}
	return nc
}

// LookupDisabled finds in a go command's words a module it could not look up
// for GOPROXY=off, or returns nil.
func LookupDisabled(msg string) *NotCachedError {
	m := lookupDisabled.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	path, version, _ := strings.Cut(m[1], "@")
	return &NotCachedError{Module: path, Version: version}
}

// lookupDisabled is the go command's words for a module it may not
// download: "example.com/kv@v0.9.0: module lookup disabled by GOPROXY=off".
var lookupDisabled = regexp.MustCompile(`((?:[A-Za-z0-9-]+\.)+[A-Za-z0-9-]+(?:/[^\s:;@]+)*(?:@[^\s:;]+)?): ` + lookupDisabledWords)

// lookupDisabledWords are the go command's words for a module GOPROXY=off
// keeps it from downloading.
const lookupDisabledWords = "module lookup disabled by GOPROXY=off"
