package kvevents

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// peer is the tests' ZMTP client: a SUB or DEALER written from the spec,
// byte by byte, rather than with the package's helpers. Its methods fail
// the test on an error; the ones ending in Err return it instead, for
// goroutines other than the test's.
type peer struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

// dialPeer connects and completes the handshake as socket type typ.
func dialPeer(t testing.TB, addr net.Addr, typ string) *peer {
	t.Helper()
	c, err := net.DialTimeout(addr.Network(), addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := newPeer(t, c)
	if err := p.handshake(typ); err != nil {
		t.Fatal(err)
	}
	return p
}

// handshake sends the greeting and READY as socket type typ, and reads
// the publisher's.
func (p *peer) handshake(typ string) error {
	g := make([]byte, 64)
	g[0], g[9], g[10], g[11] = 0xFF, 0x7F, 3, 1
	copy(g[12:], "NULL")
	if err := p.writeErr(g); err != nil {
		return err
	}
	body := []byte("\x05READY\x0bSocket-Type")
	body = binary.BigEndian.AppendUint32(body, uint32(len(typ)))
	body = append(body, typ...)
	if err := p.writeErr(append([]byte{0x04, byte(len(body))}, body...)); err != nil {
		return err
	}
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := p.readErr(64)
	if err != nil {
		return err
	}
	if got[0] != 0xFF || got[9] != 0x7F || got[10] != 3 || string(got[12:16]) != "NULL" {
		return fmt.Errorf("greeting % x", got)
	}
	fl, cmd, err := p.frameErr()
	if err != nil {
		return err
	}
	if fl != 0x04 || !bytes.HasPrefix(cmd, []byte("\x05READY")) {
		return fmt.Errorf("want READY, got flags %#x %q", fl, cmd)
	}
	return nil
}

func newPeer(t testing.TB, c net.Conn) *peer {
	return &peer{t: t, c: c, r: bufio.NewReaderSize(c, 64<<10)}
}

func (p *peer) write(b []byte) {
	p.t.Helper()
	if err := p.writeErr(b); err != nil {
		p.t.Fatal(err)
	}
}

func (p *peer) writeErr(b []byte) error {
	p.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := p.c.Write(b)
	return err
}

func (p *peer) read(n int) []byte {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := p.readErr(n)
	if err != nil {
		p.t.Fatal(err)
	}
	return b
}

// readErr reads n bytes under the deadline already set.
func (p *peer) readErr(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(p.r, b)
	return b, err
}

func (p *peer) frame() (byte, []byte) {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	fl, b, err := p.frameErr()
	if err != nil {
		p.t.Fatal(err)
	}
	return fl, b
}

// frameErr reads one frame under the deadline already set.
func (p *peer) frameErr() (byte, []byte, error) {
	h, err := p.readErr(2)
	if err != nil {
		return 0, nil, err
	}
	n := uint64(h[1])
	if h[0]&0x02 != 0 {
		rest, err := p.readErr(7)
		if err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(append(h[1:2:2], rest...))
	}
	if n > 1<<28 {
		return 0, nil, fmt.Errorf("frame of %d bytes", n)
	}
	b, err := p.readErr(int(n))
	return h[0], b, err
}

// msg reads one message, skipping commands.
func (p *peer) msg() [][]byte {
	p.t.Helper()
	m, err := p.msgErr(5 * time.Second)
	if err != nil {
		p.t.Fatal(err)
	}
	return m
}

// msgErr reads one message, skipping commands, within d.
func (p *peer) msgErr(d time.Duration) ([][]byte, error) {
	p.c.SetReadDeadline(time.Now().Add(d))
	var frames [][]byte
	for {
		fl, b, err := p.frameErr()
		if err != nil {
			return nil, err
		}
		if fl&0x04 != 0 {
			continue
		}
		frames = append(frames, b)
		if fl&0x01 == 0 {
			return frames, nil
		}
	}
}

// wire lays out a message.
func wire(frames ...[]byte) []byte {
	var out []byte
	for i, f := range frames {
		fl := byte(0)
		if i < len(frames)-1 {
			fl = 0x01
		}
		out = append(out, fl, byte(len(f)))
		out = append(out, f...)
	}
	return out
}

// send writes a message.
func (p *peer) send(frames ...[]byte) {
	p.t.Helper()
	p.write(wire(frames...))
}

// command lays out a ZMTP 3.1 command.
func command(name, data string) []byte {
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, data...)
	return append([]byte{0x04, byte(len(body))}, body...)
}

// subscribe sends a ZMTP 3.1 SUBSCRIBE command.
func (p *peer) subscribe(prefix string) {
	p.t.Helper()
	p.write(command("SUBSCRIBE", prefix))
}

// cancel sends a ZMTP 3.1 CANCEL command.
func (p *peer) cancel(prefix string) {
	p.t.Helper()
	p.write(command("CANCEL", prefix))
}

// quiet reports whether nothing arrives for d.
func (p *peer) quiet(d time.Duration) bool {
	if p.r.Buffered() > 0 {
		return false
	}
	p.c.SetReadDeadline(time.Now().Add(d))
	_, err := p.r.Peek(1)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return true
	}
	return false
}

// closed reports whether the other side closes the connection within d.
func closed(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}
