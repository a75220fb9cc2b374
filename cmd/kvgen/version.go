package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/kvgen/kvgen/internal/buildinfo"
	"golang.org/x/mod/semver"
)

// kvgenModule is kvgen's module path.
const kvgenModule = "github.com/kvgen/kvgen"

// ownVersion is versionIn for this binary.
func ownVersion() string {
	info, _ := debug.ReadBuildInfo()
	return versionIn(info)
}

// versionIn is the version of the kvgen module the binary of info was
// built from, whether kvgen is the main module (as under go tool) or a
// dependency; "" for a development build (a directory replacement, no
// version, or a modified checkout), which no version names exactly.
func versionIn(info *debug.BuildInfo) string {
	v := buildinfo.ModuleVersion(info, kvgenModule)
	if !semver.IsValid(v) || semver.Build(v) != "" {
		return "" // "(devel)", "v0.0.0 => ../kvgen", or a "+dirty" checkout
	}
	return v
}

// generatorIdentity names this kvgen for the check cache: its module
// version, and for a development build, which has none, the executable
// itself (its path, size and modification time: a rebuilt kvgen is a new
// file). It is "" when neither can be read, and then there is no cache.
func generatorIdentity() string {
	var id string
	info, ok := debug.ReadBuildInfo()
	if ok {
		id = info.GoVersion
	}
	if v := versionIn(info); v != "" {
		return id + " " + v
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	return id + " " + exe + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().UTC().String()
}

func runVersion(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "version", "")
	if code := noArgs(e, fs, "version", args); code >= 0 {
		return code
	}
	// What the go command recorded, a modified checkout's "+dirty" or a
	// replacement's directory included: more to go on in a bug report
	// than versionIn, which names only exact versions.
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintf(e.stdout, "kvgen %s\n", cmp.Or(buildinfo.ModuleVersion(info, kvgenModule), "(devel)"))
	return exitOK
}
