package deploy_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// redisServer is a redis-server without persistence on a free port of
// 127.0.0.1, for the Redis connector of the built binaries.
type redisServer struct {
	addr string
}

// startRedis starts a redis-server that stops when t ends. Without
// redis-server the test is skipped, or fails in CI (CI set), which must
// run every test.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		const msg = "redis-server not found; install it (apt-get install redis-server) to run the Redis handoff"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// Another process may take the port between choosing and binding it;
	// a fresh port on the next attempt makes that race harmless.
	for attempt := 1; ; attempt++ {
		addr, err := launchRedis(t, bin)
		if err == nil {
			return &redisServer{addr: addr}
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("redis-server: trying another port: %v", err)
	}
}

// launchRedis starts redis-server on a free port and waits until it answers
// PING, or exits, or 10 seconds pass.
func launchRedis(t *testing.T, bin string) (string, error) {
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logfile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", logfile)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}

	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := ping(addr)
		if err == nil {
			t.Cleanup(stop)
			return addr, nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logfile)
			return "", fmt.Errorf("redis-server on %s exited: %s", addr, log)
		case <-deadline:
			stop()
			return "", fmt.Errorf("redis-server on %s does not answer PING within 10s: %w", addr, err)
		case <-tick.C:
		}
	}
}

// ping sends an inline PING command and expects +PONG.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
