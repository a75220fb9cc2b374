package manifest

import "strings"

// The schema's patterns for the string keys whose rules kvgen checks in
// code: each accepts what kvgen accepts, and refuses what it refuses where
// a regular expression can tell, so that an editor marks a value before
// kvgen does. They are ECMA-262 expressions, as JSON Schema's are, and
// name characters in ASCII: a name in other letters, which kvgen accepts,
// is marked where kvgen would not.
var patterns = map[string]string{
	"version":     versionPattern,
	"factory":     "^" + importPathRE + `\.[A-Z][A-Za-z0-9_]*$`,
	"package":     packagePattern,
	"output":      outputPattern(),
	"extends":     relativePattern,
	"import":      "^" + importPathRE + "$",
	"constructor": `^[A-Z][A-Za-z0-9_]*$`,
	"replace":     relativePattern,
}

// versionPattern is a canonical semantic version, as golang.org/x/mod's
// semver package reads one, or one with +incompatible: what version:
// accepts.
const versionPattern = `^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
	`(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?` +
	`(\+incompatible)?$`

// importPathRE is a Go import path, as golang.org/x/mod's CheckImportPath
// reads one: elements of letters, digits and "-._~+", none ending in a
// dot, the first not starting with a dash.
const importPathRE = `([A-Za-z0-9_~+]|[A-Za-z0-9._~+][A-Za-z0-9._~+-]*[A-Za-z0-9_~+-])(/[A-Za-z0-9._~+-]*[A-Za-z0-9_~+-])*`

// packagePattern is a Go identifier that is neither a keyword nor "_".
const packagePattern = `^(?!(break|case|chan|const|continue|default|defer|else|fallthrough|for|func|go|goto|if|import|interface|map|package|range|return|select|struct|switch|type|var)$)(?!_$)[A-Za-z_][A-Za-z0-9_]*$`

// relativePattern is a path relative to the manifest as checkRelative
// takes one: not absolute, "/" between its names, and clean (no empty or
// "." names, no ".." after a name), or ".".
const relativePattern = `^(\.|(?![A-Za-z]:)(?!/)(?!.*\\)(?!.*//)(?!.*/$)(?!(.*/)?\.(/|$))(?!(.*/)?(?!\.\.(/|$))[^/]+/\.\.(/|$)).+)$`

// knownOS and knownArch are the GOOS and GOARCH names go/build reads in a
// file name; a Go test checks each against go/build, and that every
// system the go command builds for is here.
var (
	knownOS   = []string{"aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios", "js", "linux", "nacl", "netbsd", "openbsd", "plan9", "solaris", "wasip1", "windows", "zos"}
	knownArch = []string{"386", "amd64", "amd64p32", "arm", "armbe", "arm64", "arm64be", "loong64", "mips", "mipsle", "mips64", "mips64le", "mips64p32", "mips64p32le", "ppc", "ppc64", "ppc64le", "riscv", "riscv64", "s390", "s390x", "sparc", "sparc64", "wasm"}
)

// outputPattern is the generated file's path as checkOutput takes it:
// relative, inside the manifest's directory, of plain names (those
// golang.org/x/mod's CheckFilePath allows), ending in a Go file that go
// build compiles everywhere: .go, not _test.go, not starting with "." or
// "_", no GOOS or GOARCH at the end of its name before the first dot.
func outputPattern() string {
	const char = `[A-Za-z0-9!#$%&()+,.=@[\]^_{}~ -]`
	const dir = `(\.|` + char + `*[A-Za-z0-9!#$%&()+,=@[\]^_{}~ -])/`
	systems := strings.Join(append(append([]string{}, knownOS...), knownArch...), "|")
	return `^(` + dir + `)*` +
		`(?![._])(?![^./]*_(` + systems + `)(\.|$))(?!.*_test\.go$)` + char + `*\.go$`
}
