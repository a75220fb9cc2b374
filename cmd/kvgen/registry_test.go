package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// registryProgram finds distribution's registry program on PATH.
func registryProgram() (string, error) {
	prog, err := exec.LookPath("registry")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(prog, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "distribution") {
		return "", fmt.Errorf("%s is not distribution's registry: %s", prog, out)
	}
	return prog, nil
}

// hasRegistry is the [registry] condition: distribution's registry
// program is on PATH (.ci/run installs it), or this is CI, where its
// absence fails the script instead of skipping it.
func hasRegistry() bool {
	_, err := registryProgram()
	return err == nil || os.Getenv("CI") == "true"
}

// startRegistry runs `registry`: it starts distribution's registry
// program on a free loopback port, serving plain HTTP, sets $REGISTRY to
// its host:port, and stops it when the script ends.
func startRegistry(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: registry")
	}
	prog, err := registryProgram()
	if err != nil {
		ts.Fatalf("needs distribution's registry program on PATH (go install github.com/distribution/distribution/v3/cmd/registry@v3.1.2; .ci/run does): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	host := l.Addr().String()
	l.Close()
	dir := ts.MkAbs(".registry")
	ts.Check(os.MkdirAll(dir, 0o755))
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n  secret: kvgen-test\n", filepath.Join(dir, "data"), host)
	cfgFile := filepath.Join(dir, "config.yml")
	ts.Check(os.WriteFile(cfgFile, []byte(cfg), 0o644))
	cmd := exec.Command(prog, "serve", cfgFile)
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	ts.Check(cmd.Start())
	ts.Defer(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := client.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("the registry did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ts.Setenv("REGISTRY", host)
}
