package deploy_test

import (
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// startRedis starts a redis-server on a free port of 127.0.0.1, without
// persistence, for t, and returns its address. The Redis connector's own
// module has the fuller harness (TLS, Cluster, restarts); this module
// cannot import it, and the deployment test needs only a server. Without
// redis-server on PATH t fails, unless KVGEN_SKIP_REDIS=1 skips it.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("KVGEN_SKIP_REDIS") == "1" {
			t.Skip("redis-server not found, and KVGEN_SKIP_REDIS=1")
		}
		t.Fatal("redis-server not found: install it (apt-get install redis-server), or set KVGEN_SKIP_REDIS=1 to skip the tests that need it")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--logfile", dir+"/redis.log")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// Listening is enough: an empty server without persistence serves
	// as soon as it accepts.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return addr
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(dir + "/redis.log")
			t.Fatalf("redis-server on port %s exited (%v): %s", port, err, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %s does not listen after 10s", port)
		}
	}
}
