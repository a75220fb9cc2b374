// Package redistest runs real redis-server processes for tests: on free
// ports of 127.0.0.1, without persistence, killable and restartable on the
// same port; a single server, a TLS server (tls.go) or a Redis Cluster of
// three masters with a replica each (cluster.go).
package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a redis-server process on a free port of 127.0.0.1,
// without persistence, that a test may kill and start again on the same
// port.
type Server struct {
	t      testing.TB
	bin    string
	dir    string
	port   int
	port2  int // {port2} in Options.Args
	opts   Options
	cmd    *exec.Cmd
	exited chan struct{}
}

// Options change how a server starts.
type Options struct {
	// Args are more redis-server arguments. Each may contain {dir}, the
	// server's own directory, and {port2}, a second free port.
	Args []string
	// TLS, when set, makes the server listen with TLS only (Args must name
	// its certificates) and is the configuration of the harness's own
	// readiness PINGs.
	TLS *tls.Config
}

// Start starts a redis-server for t and stops it when t ends. Without
// redis-server on PATH the test fails, unless KVGEN_SKIP_REDIS=1.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, bin: lookPath(t, "redis-server"), dir: t.TempDir(), opts: opts}
	t.Cleanup(s.Kill)
	// Another process may take the port between probing and binding it;
	// a few fresh ports make that race harmless.
	for attempt := 1; ; attempt++ {
		s.port, s.port2 = FreePort(t), FreePort(t)
		err := s.start()
		if err == nil {
			return s
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("retrying on another port: %v", err)
	}
}

// lookPath finds a Redis program, failing t without it, as README says
// the tests need it, unless KVGEN_SKIP_REDIS=1 asks to skip the tests
// that need one.
func lookPath(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("KVGEN_SKIP_REDIS") == "1" {
			t.Skipf("%s not found, and KVGEN_SKIP_REDIS=1", name)
		}
		t.Fatalf("%s not found: install it (apt-get install redis-server, which brings redis-cli), or set KVGEN_SKIP_REDIS=1 to skip the tests that need it", name)
	}
	return bin
}

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Kill stops the server with SIGKILL, as a crash would, and waits for it to
// exit. It does nothing if the server is not running.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart starts the server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// Running reports whether the server process is running.
func (s *Server) Running() bool { return s.cmd != nil }

func (s *Server) start() error {
	logfile := filepath.Join(s.dir, "redis.log")
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--save", "",
		"--appendonly", "no",
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--logfile", logfile,
	}
	if s.opts.TLS != nil {
		args[1] = "0"
		args = append(args, "--tls-port", strconv.Itoa(s.port))
	}
	r := strings.NewReplacer("{dir}", s.dir, "{port2}", strconv.Itoa(s.port2))
	for _, a := range s.opts.Args {
		args = append(args, r.Replace(a))
	}
	cmd := exec.Command(s.bin, args...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(s.Addr(), s.opts.TLS)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			s.cmd = nil
			log, _ := os.ReadFile(logfile)
			return fmt.Errorf("redis-server on port %d exited: %s", s.port, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on port %d does not answer PING after 10s: %w", s.port, err)
		}
	}
}

// ping sends an inline PING and expects +PONG.
func ping(addr string, tlsConf *tls.Config) error {
	var conn net.Conn
	var err error
	if tlsConf != nil {
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, tlsConf)
	} else {
		conn, err = net.DialTimeout("tcp", addr, time.Second)
	}
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
		return errors.New("PING answered " + strconv.Quote(line))
	}
	return nil
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listened on a
// moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
