package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/kvgen/kvgen/internal/buildinfo"
	"golang.org/x/mod/module"
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

// releaseIn is the release of kvgen the binary of info was built from,
// as path@version: kvgen's module path, or a fork's that replaces it
// (whose version may be upstream's); built from a checkout, where kvgen
// is the main module, its commit too (a fork's checkout may keep the path
// and the tag's name); "" for a development build.
func releaseIn(info *debug.BuildInfo) string {
	v := versionIn(info)
	if v == "" {
		return ""
	}
	path := kvgenModule
	m := &info.Main
	if m.Path != kvgenModule {
		if i := slices.IndexFunc(info.Deps, func(d *debug.Module) bool { return d.Path == kvgenModule }); i >= 0 {
			m = info.Deps[i]
		}
	}
	if r := m.Replace; r != nil && r.Version != "" {
		path = r.Path
	}
	release := path + "@" + v
	if m == &info.Main {
		// The main module's commit, which names no dependency's.
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				release += " " + s.Value
			}
		}
	}
	return release
}

// generatorIdentity names this kvgen for the cache: its module
// version, and for a development build, which has none, the executable
// itself (its path, size and modification time: a rebuilt kvgen is a new
// file). It is "" when neither can be read, and then there is no cache.
func generatorIdentity() string {
	var id string
	info, ok := debug.ReadBuildInfo()
	if ok {
		id = info.GoVersion
	}
	if v := releaseIn(info); v != "" {
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
	fs := newFlags(e, "version", "[-json]")
	e.jsonFlag(fs, "{version, go, revision, dirty, problems}")
	if code := noArgs(e, fs, "version", args); code >= 0 {
		return code
	}
	info, _ := debug.ReadBuildInfo()
	v := versionOf(info)
	if e.asJSON {
		e.json.set("version", v.Version)
		e.json.set("go", v.Go)
		if v.Revision != "" {
			e.json.set("revision", v.Revision)
		}
		e.json.set("dirty", v.Dirty)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "kvgen %s\n", v.Version)
	return exitOK
}

// kvgenVersion is what kvgen version reports of the binary.
type kvgenVersion struct {
	// Version is the kvgen module's version as the go command recorded
	// it, a modified checkout's "+dirty" or a replacement's directory
	// included: more to go on in a bug report than versionIn, which names
	// only exact versions. "(devel)" when it recorded none.
	Version string
	// Go is the Go release that built the binary.
	Go string
	// Revision is the commit kvgen was built from: the go command's
	// vcs.revision when kvgen was the main module of a checkout, else
	// what a pseudo-version names (its first 12 hex digits); "" when
	// neither says, as for a release.
	Revision string
	// Dirty is whether the checkout had changes not committed.
	Dirty bool
}

func versionOf(info *debug.BuildInfo) kvgenVersion {
	v := kvgenVersion{Version: cmp.Or(buildinfo.ModuleVersion(info, kvgenModule), "(devel)")}
	if info == nil {
		return v
	}
	v.Go = info.GoVersion
	// vcs.* are the main module's: kvgen's only when kvgen is it.
	if info.Main.Path == kvgenModule {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.modified":
				v.Dirty = s.Value == "true"
			}
		}
	}
	// Go 1.24 and later mark a modified checkout's version "+dirty".
	build := semver.Build(v.Version)
	v.Dirty = v.Dirty || build == "+dirty"
	if pv := strings.TrimSuffix(v.Version, build); v.Revision == "" && module.IsPseudoVersion(pv) {
		v.Revision, _ = module.PseudoVersionRev(pv)
	}
	return v
}
