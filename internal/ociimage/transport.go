package ociimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// defaultGrace is how long a body runs before the minimum rate applies.
const defaultGrace = 30 * time.Second

// transport is the one way every request to a registry goes, redirect
// hops and token requests included: it holds each to the host policy,
// each exchange to the command's registry time and each body, sent or
// received, to the minimum rate.
type transport struct {
	next http.RoundTripper
	// registry is the host:port the reference names, as oras reaches it.
	registry string
	// plainHTTP allows http:// to registry alone (-insecure, which Check
	// allows only for loopback).
	plainHTTP bool
	clock     *clock // nil for no total
	minRate   int64  // bytes per second; 0 for none
	grace     time.Duration
}

// boundError is an exchange ended by one of kvgen's bounds or refused by
// its host policy.
type boundError struct{ msg string }

func (e *boundError) Error() string { return e.msg }

// dockerHub and its token service, auth.docker.io: see credentialsLeave.
const (
	dockerHub      = "registry-1.docker.io:443"
	dockerHubToken = "auth.docker.io:443"
)

// hostPort is u's lower-case host with its scheme's port, as the policy
// compares hosts: 127.0.0.1:5000 and 127.0.0.1:5001 are two hosts.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Hostname()) + ":" + port
}

// policy checks a request against the host policy, and returns the
// request to send: req, or a copy without its Authorization header.
func (t *transport) policy(req *http.Request) (*http.Request, error) {
	host := hostPort(req.URL)
	switch req.URL.Scheme {
	case "https":
	case "http":
		if !t.plainHTTP {
			return nil, &boundError{fmt.Sprintf("refused plain HTTP to %s: without -insecure, registries are reached over HTTPS only, redirects included", host)}
		}
		if host != t.registry {
			return nil, &boundError{fmt.Sprintf("refused plain HTTP to %s: -insecure allows it only to the registry named, %s, not to where it redirects or sends for a token", host, t.registry)}
		}
	default:
		return nil, &boundError{fmt.Sprintf("refused a request to %s: not HTTP or HTTPS", req.URL.Redacted())}
	}
	if host == t.registry || !credentialsLeave(req) {
		return req, nil
	}
	if req.Response != nil {
		// A redirect off the registry, such as a blob's to its storage,
		// goes without the registry's authorization (net/http keeps it
		// for another port or a subdomain).
		if req.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
			return nil, &boundError{fmt.Sprintf("refused to send a token request's form, which holds credentials for %s, to %s, where a redirect led", t.registry, host)}
		}
		req = req.Clone(req.Context())
		req.Header.Del("Authorization")
		return req, nil
	}
	// Docker Hub keeps its credentials as those of the Hub as a whole
	// (https://index.docker.io/v1/ in Docker's config), and its registry
	// sends every client to its token service, auth.docker.io, which is
	// where docker itself sends them: they are the Hub's on either host.
	if t.registry == dockerHub && host == dockerHubToken && req.URL.Scheme == "https" {
		return req, nil
	}
	return nil, &boundError{fmt.Sprintf("refused to send the credentials for %s to %s, another host, which it named for its tokens: Docker's credentials go only to the host they are for", t.registry, host)}
}

// credentialsLeave reports whether req carries credentials: an
// Authorization header, or a token request's form (OAuth2's password or
// refresh token). The only requests oras makes to a host other than the
// registry are token requests, to the realm the registry names, and they
// carry the registry's credentials from Docker's config, when it has any.
func credentialsLeave(req *http.Request) bool {
	return req.Header.Get("Authorization") != "" || (req.Body != nil && req.Body != http.NoBody && req.Header.Get("Content-Type") == "application/x-www-form-urlencoded")
}

// RoundTrip sends req if the policy allows it, within the time the
// command has left and at the minimum rate.
func (t *transport) RoundTrip(orig *http.Request) (*http.Response, error) {
	req, err := t.policy(orig)
	if err != nil {
		closeBody(orig)
		return nil, err
	}
	host := hostPort(req.URL)
	x := &exchange{parent: req.Context(), clock: t.clock}
	ctx, cancel := context.WithCancelCause(req.Context())
	x.cancel = cancel
	if t.clock != nil {
		deadline, limit, ok := t.clock.start()
		if !ok {
			cancel(nil)
			closeBody(req)
			return nil, tooLong(host, limit)
		}
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, deadline, tooLong(host, limit))
		x.stop = stop
	}
	x.ctx = ctx
	out := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		out.Body = &sent{rc: req.Body, m: t.meter(host, "took", x)}
		if get := req.GetBody; get != nil {
			out.GetBody = func() (io.ReadCloser, error) {
				rc, err := get()
				if err != nil {
					return nil, err
				}
				return &sent{rc: rc, m: t.meter(host, "took", x)}, nil
			}
		}
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		err = x.cause(err)
		x.end()
		return nil, err
	}
	resp.Body = &received{rc: resp.Body, m: t.meter(host, "sent", x), x: x}
	return resp, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

func tooLong(host string, limit time.Duration) error {
	return &boundError{fmt.Sprintf("the registry %s: the command's registry exchanges took all of -registry-timeout (%s); a larger image or a slower link needs a larger -registry-timeout", host, limit)}
}

// exchange is one request and its response, from the request's start to
// its response body's end.
type exchange struct {
	parent, ctx context.Context
	cancel      context.CancelCauseFunc
	stop        context.CancelFunc // the deadline's, if any
	clock       *clock
	once        sync.Once
}

// cause is err, or the bound that ended the exchange, if one did.
func (x *exchange) cause(err error) error {
	var b *boundError
	if x.parent.Err() == nil && errors.As(context.Cause(x.ctx), &b) {
		return b
	}
	return err
}

// end ends the exchange: its clock stops, its context is done.
func (x *exchange) end() {
	x.once.Do(func() {
		x.cancel(nil)
		if x.stop != nil {
			x.stop()
		}
		if x.clock != nil {
			x.clock.stop()
		}
	})
}

// received is a response body: when it ends, so does its exchange.
type received struct {
	rc io.ReadCloser
	m  *meter
	x  *exchange
}

func (b *received) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.m.add(n)
	if err != nil {
		if err != io.EOF {
			err = b.x.cause(err)
		}
		b.m.stop()
		b.x.end()
	}
	return n, err
}

func (b *received) Close() error {
	err := b.rc.Close()
	b.m.stop()
	b.x.end()
	return err
}

// sent is a request body.
type sent struct {
	rc io.ReadCloser
	m  *meter
}

func (b *sent) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.m.add(n)
	if err != nil {
		b.m.stop()
	}
	return n, err
}

func (b *sent) Close() error {
	b.m.stop()
	return b.rc.Close()
}

// meter ends an exchange when a body, once it has run the grace period,
// moves fewer bytes in a period of that length than the minimum rate
// asks. A nil meter measures nothing.
type meter struct {
	n       int64
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// meter starts a meter for one body of x: the registry at host "sent"
// it, or "took" it.
func (t *transport) meter(host, verb string, x *exchange) *meter {
	if t.minRate <= 0 {
		return nil
	}
	period := t.grace
	if period <= 0 {
		period = defaultGrace
	}
	want := int64(math.Ceil(float64(t.minRate) * period.Seconds()))
	m := &meter{}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.timer = time.AfterFunc(period, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.stopped {
			return
		}
		if m.n >= want {
			m.n = 0
			m.timer.Reset(period)
			return
		}
		x.cancel(&boundError{fmt.Sprintf("the registry %s %s %s in %s (%s/s), slower than -registry-min-rate (%s/s); a slower link needs a lower -registry-min-rate, or 0 for none", host, verb, byteCount(float64(m.n)), period, byteCount(float64(m.n)/period.Seconds()), byteCount(float64(t.minRate)))})
	})
	return m
}

func (m *meter) add(n int) {
	if m == nil || n == 0 {
		return
	}
	m.mu.Lock()
	m.n += int64(n)
	m.mu.Unlock()
}

func (m *meter) stop() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.stopped = true
	m.timer.Stop()
	m.mu.Unlock()
}

// byteCount is n bytes as a person reads it: 512 B, 1.5 KiB, 64 KiB, 2.3 MiB.
func byteCount(n float64) string {
	unit := "B"
	for _, u := range []string{"KiB", "MiB", "GiB"} {
		if n < 1024 {
			break
		}
		n, unit = n/1024, u
	}
	return strconv.FormatFloat(math.Round(n*10)/10, 'f', -1, 64) + " " + unit
}

// clock is the time a command's registry exchanges have taken: the time
// during which at least one is under way, so that a build's compilation
// between its base's reads and its push is not counted.
type clock struct {
	mu     sync.Mutex
	limit  time.Duration
	used   time.Duration
	active int
	since  time.Time
}

// start starts an exchange, and returns when the time left runs out if
// it stays under way: a deadline that holds whatever other exchanges
// run, since while it runs the clock runs. ok is false if no time is
// left.
func (c *clock) start() (deadline time.Time, limit time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	used := c.used
	if c.active > 0 {
		used += now.Sub(c.since)
	} else {
		c.since = now
	}
	if used >= c.limit {
		return time.Time{}, c.limit, false
	}
	c.active++
	return now.Add(c.limit - used), c.limit, true
}

func (c *clock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active--
	if c.active == 0 {
		c.used += time.Since(c.since)
	}
}
