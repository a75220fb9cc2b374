package kvgentest

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// DownloadGraph downloads, into the module cache of env (the process's
// environment if nil), the .info, .mod and .zip of every module version in
// the module graph of the module in dir but this repository's own, which
// are not published. The scripts' module proxies serve a published kvgen's
// dependencies from those downloads: a host that requires kvgen resolves
// its graph, and one whose graph lacks some of kvgen's requirements selects
// lower versions, so every version must be there, not only those a build
// selects.
func DownloadGraph(dir string, env []string) error {
	graph := exec.Command("go", "mod", "graph")
	graph.Dir, graph.Env = dir, env
	out, err := graph.Output()
	if err != nil {
		return fmt.Errorf("go mod graph: %v%s", err, stderrOf(err))
	}
	args := []string{"mod", "download"}
	seen := map[string]bool{}
	for _, mv := range strings.Fields(string(out)) {
		path, _, ok := strings.Cut(mv, "@")
		if !ok || seen[mv] || path == "go" || path == "toolchain" || path == Path || strings.HasPrefix(path, Path+"/") {
			continue
		}
		seen[mv] = true
		args = append(args, mv)
	}
	download := exec.Command("go", args...)
	download.Dir, download.Env = dir, env
	if out, err := download.CombinedOutput(); err != nil {
		return fmt.Errorf("go mod download: %v\n%s", err, out)
	}
	return nil
}

// stderrOf is what a command that failed printed on stderr, if Output kept
// it.
func stderrOf(err error) string {
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && len(ee.Stderr) > 0 {
		return "\n" + string(ee.Stderr)
	}
	return ""
}
