package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// DownloadAll downloads into the module cache of env (the process's
// environment if nil) what go mod download all would for the module in
// dir: the .info, .mod and .zip of every module in its build list, which
// is what its tests, and the scripts' module proxies serving a published
// kvgen's dependencies from those downloads, can ask of it. go mod download
// all records the sums of those modules in go.sum; this leaves go.mod and
// go.sum as they are, by downloading through copies of them (-modfile).
func DownloadAll(dir string, env []string) error {
	tmp, err := os.MkdirTemp("", "kvgen-download-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !(name == "go.sum" && os.IsNotExist(err)) {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return err
		}
	}
	if env == nil {
		env = os.Environ()
	}
	cmd := exec.Command("go", "mod", "download", "-modfile="+filepath.Join(tmp, "go.mod"), "all")
	// -modfile is not for workspaces; each module is downloaded for.
	cmd.Dir, cmd.Env = dir, append(env, "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: go mod download all: %v\n%s", dir, err, out)
	}
	return nil
}
