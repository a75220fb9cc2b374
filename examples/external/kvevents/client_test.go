package kvevents

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// peer is the tests' ZMTP client: a SUB or DEALER written from the spec,
// byte by byte, rather than with the package's helpers.
type peer struct {
	t *testing.T
	c net.Conn
}

// dialPeer connects and completes the handshake as socket type typ.
func dialPeer(t *testing.T, addr net.Addr, typ string) *peer {
	t.Helper()
	c, err := net.DialTimeout(addr.Network(), addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := &peer{t: t, c: c}
	g := make([]byte, 64)
	g[0], g[9], g[10], g[11] = 0xFF, 0x7F, 3, 1
	copy(g[12:], "NULL")
	p.write(g)
	body := []byte("\x05READY\x0bSocket-Type")
	body = binary.BigEndian.AppendUint32(body, uint32(len(typ)))
	body = append(body, typ...)
	p.write(append([]byte{0x04, byte(len(body))}, body...))
	got := p.read(64)
	if got[0] != 0xFF || got[9] != 0x7F || got[10] != 3 || string(got[12:16]) != "NULL" {
		t.Fatalf("greeting % x", got)
	}
	fl, cmd := p.frame()
	if fl != 0x04 || string(cmd[:6]) != "\x05READY" {
		t.Fatalf("want READY, got flags %#x %q", fl, cmd)
	}
	return p
}

func (p *peer) write(b []byte) {
	p.t.Helper()
	p.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := p.c.Write(b); err != nil {
		p.t.Fatal(err)
	}
}

func (p *peer) read(n int) []byte {
	p.t.Helper()
	b := make([]byte, n)
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(p.c, b); err != nil {
		p.t.Fatal(err)
	}
	return b
}

func (p *peer) frame() (byte, []byte) {
	p.t.Helper()
	h := p.read(2)
	n := uint64(h[1])
	if h[0]&0x02 != 0 {
		n = binary.BigEndian.Uint64(append(h[1:2:2], p.read(7)...))
	}
	if n > 1<<28 {
		p.t.Fatalf("frame of %d bytes", n)
	}
	return h[0], p.read(int(n))
}

// msg reads one message, skipping commands.
func (p *peer) msg() [][]byte {
	p.t.Helper()
	var frames [][]byte
	for {
		fl, b := p.frame()
		if fl&0x04 != 0 {
			continue
		}
		frames = append(frames, b)
		if fl&0x01 == 0 {
			return frames
		}
	}
}

// send writes a message.
func (p *peer) send(frames ...[]byte) {
	p.t.Helper()
	var out []byte
	for i, f := range frames {
		fl := byte(0)
		if i < len(frames)-1 {
			fl = 0x01
		}
		out = append(out, fl, byte(len(f)))
		out = append(out, f...)
	}
	p.write(out)
}

// subscribe sends a ZMTP 3.1 SUBSCRIBE command.
func (p *peer) subscribe(prefix string) {
	body := append([]byte("\x09SUBSCRIBE"), prefix...)
	p.write(append([]byte{0x04, byte(len(body))}, body...))
}

// cancel sends a ZMTP 3.1 CANCEL command.
func (p *peer) cancel(prefix string) {
	body := append([]byte("\x06CANCEL"), prefix...)
	p.write(append([]byte{0x04, byte(len(body))}, body...))
}

// quiet reports whether nothing arrives for d.
func (p *peer) quiet(d time.Duration) bool {
	p.c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	_, err := p.c.Read(b[:])
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
