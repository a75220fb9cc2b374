package testenv

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ScriptGoPath is the GOPATH of cmd/kvgen's scripts: kvgen-test in the
// user's cache directory, at the same path on every run, so that a second
// run extracts no module again and a build outside -trimpath, whose cache
// keys hold its packages' directories, finds them compiled.
func ScriptGoPath() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "kvgen-test", "gopath"), nil
}

// ToolEnv is what the tests add to env (the process's if nil) to build
// kvgen as the scripts' go tool kvgen builds it: with its dependencies
// from the scripts' module cache (ScriptGoPath), fed from the user's
// module cache's downloads first. A build outside -trimpath compiles a
// dependency for each directory it is in, so building kvgen from the
// user's module cache as well compiled all of them twice on a cold build
// cache. Without a user cache directory it adds nothing, as the scripts
// then use a module cache of their own for the run.
func ToolEnv(env []string) ([]string, error) {
	gopath, err := ScriptGoPath()
	if err != nil {
		return nil, nil
	}
	if env == nil {
		env = os.Environ()
	}
	cmd := exec.Command("go", "env", "GOMODCACHE", "GOPROXY")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMODCACHE GOPROXY: %v", err)
	}
	modcache, proxy, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	dir := filepath.ToSlash(filepath.Join(modcache, "cache", "download"))
	if !strings.HasPrefix(dir, "/") {
		dir = "/" + dir // C:/… on Windows
	}
	downloads := (&url.URL{Scheme: "file", Path: dir}).String()
	if proxy != "" {
		downloads += "," + proxy
	}
	return []string{
		"GOPATH=" + gopath,
		"GOMODCACHE=" + filepath.Join(gopath, "pkg", "mod"),
		"GOPROXY=" + downloads,
	}, nil
}
