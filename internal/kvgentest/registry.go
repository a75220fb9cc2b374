package kvgentest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// RegistryProgram finds distribution's registry program on PATH; the
// error says how to install it.
func RegistryProgram() (string, error) {
	prog, err := exec.LookPath("registry")
	if err == nil {
		out, verr := exec.Command(prog, "--version").CombinedOutput()
		if verr != nil || !strings.Contains(string(out), "distribution") {
			err = fmt.Errorf("%s is not distribution's registry: %s", prog, out)
		}
	}
	if err != nil {
		return "", fmt.Errorf("needs distribution's registry program on PATH (go install github.com/distribution/distribution/v3/cmd/registry@v3.1.2; .ci/run does): %w", err)
	}
	return prog, nil
}

// RegistryOptions change how a registry serves.
type RegistryOptions struct {
	// Cert and Key, when set, are the files of a certificate and its key,
	// and the registry serves HTTPS with them.
	Cert, Key string
	// Htpasswd, when set, is an htpasswd file, and the registry asks for
	// basic authentication by it.
	Htpasswd string
}

// Registry is distribution's registry program serving on a free port of
// 127.0.0.1, with deletes enabled.
type Registry struct {
	Host   string         // 127.0.0.1:PORT
	Roots  *x509.CertPool // what verifies its certificate, if it has one
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartRegistry starts the registry program prog, with its configuration
// and storage in dir, and waits until it answers. Stop stops it.
func StartRegistry(prog, dir string, opts RegistryOptions) (*Registry, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Registry{Host: l.Addr().String()}
	l.Close()
	scheme := "http"
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n  secret: kvgen-test\n", filepath.Join(dir, "data"), r.Host)
	if opts.Cert != "" {
		cfg += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", opts.Cert, opts.Key)
		scheme = "https"
		pemData, err := os.ReadFile(opts.Cert)
		if err != nil {
			return nil, err
		}
		r.Roots = x509.NewCertPool()
		if !r.Roots.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("%s holds no certificate", opts.Cert)
		}
	}
	if opts.Htpasswd != "" {
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: kvgen-test\n    path: %s\n", opts.Htpasswd)
	}
	cfgFile := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	r.cmd = exec.Command(prog, "serve", cfgFile)
	r.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	// The logs are read only once the registry has exited, and with it
	// the copying into them.
	var logs bytes.Buffer
	r.cmd.Stdout, r.cmd.Stderr = &logs, &logs
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	r.exited = make(chan struct{})
	go func() {
		_ = r.cmd.Wait()
		close(r.exited)
	}()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.Roots}}}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := client.Get(scheme + "://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return r, nil
			}
			err = errors.New(resp.Status)
		}
		select {
		case <-r.exited:
			return nil, fmt.Errorf("the registry exited: %s", logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("the registry did not start: %v\n%s", err, logs.String())
		}
	}
}

// Stop stops the registry and waits for it to exit.
func (r *Registry) Stop() {
	_ = r.cmd.Process.Kill()
	<-r.exited
}
