package kvevents

// The subset of ZMTP 3.0 and 3.1 (rfc.zeromq.org/spec/23 and /37) the
// publisher speaks: the NULL mechanism, PUB with subscriptions as 3.1
// commands or 3.0 messages, and ROUTER for replay. Every read from a
// peer is bounded: frame sizes are checked against a cap before anything
// is allocated, and a message has a cap on its frames and bytes.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

const (
	greetingLen = 64

	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
	flagsKnown  = flagMore | flagLong | flagCommand

	// maxFramesPerMessage bounds a peer's message: subscriptions are one
	// frame, replay requests two.
	maxFramesPerMessage = 8
)

// errFrameTooLarge reports a frame declared larger than the cap.
var errFrameTooLarge = errors.New("zmtp: peer's frame is larger than allowed")

// greeting returns ZMTP 3.1's greeting with the NULL mechanism.
func greeting(asServer bool) []byte {
	g := make([]byte, greetingLen)
	g[0] = 0xFF
	g[9] = 0x7F
	g[10], g[11] = 3, 1
	copy(g[12:32], "NULL")
	if asServer {
		g[32] = 1
	}
	return g
}

// checkGreeting accepts a ZMTP 3.x greeting with the NULL mechanism.
func checkGreeting(g []byte) error {
	if g[0] != 0xFF || g[9]&0x01 == 0 {
		return errors.New("zmtp: not a ZMTP greeting")
	}
	if g[10] < 3 {
		return fmt.Errorf("zmtp: peer speaks ZMTP %d.%d; want 3.0 or later", g[10], g[11])
	}
	mech := g[12:32]
	want := make([]byte, 20)
	copy(want, "NULL")
	if string(mech) != string(want) {
		return fmt.Errorf("zmtp: peer's security mechanism %q; only NULL is served", trimNUL(mech))
	}
	return nil
}

func trimNUL(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// compatible lists the peer socket types each of ours talks to.
var compatible = map[string][]string{
	"PUB":    {"SUB", "XSUB"},
	"ROUTER": {"DEALER", "REQ", "ROUTER"},
}

// handshake exchanges greetings and READY commands on c as a socket of
// type ours, and returns the peer's socket type. It bounds the whole
// exchange by deadline.
func handshake(c net.Conn, ours string, asServer bool, deadline time.Time, maxFrame int) (string, error) {
	if err := c.SetDeadline(deadline); err != nil {
		return "", err
	}
	defer c.SetDeadline(time.Time{})
	ready := append([]byte{5}, "READY"...)
	ready = appendProperty(ready, "Socket-Type", ours)
	out := append(greeting(asServer), frameHeader(flagCommand, len(ready))...)
	out = append(out, ready...)
	if _, err := c.Write(out); err != nil {
		return "", err
	}
	g := make([]byte, greetingLen)
	if _, err := io.ReadFull(c, g); err != nil {
		return "", fmt.Errorf("zmtp: greeting: %w", err)
	}
	if err := checkGreeting(g); err != nil {
		return "", err
	}
	fl, body, err := readFrame(c, maxFrame)
	if err != nil {
		return "", err
	}
	if fl&flagCommand == 0 {
		return "", errors.New("zmtp: peer sent a message before READY")
	}
	name, data, err := parseCommand(body)
	if err != nil {
		return "", err
	}
	if name == "ERROR" {
		return "", fmt.Errorf("zmtp: peer refused: %q", data)
	}
	if name != "READY" {
		return "", fmt.Errorf("zmtp: peer sent %q before READY", name)
	}
	props, err := parseProperties(data)
	if err != nil {
		return "", err
	}
	peer, ok := props["socket-type"]
	if !ok {
		return "", errors.New("zmtp: peer's READY names no Socket-Type")
	}
	if !contains(compatible[ours], peer) {
		return "", fmt.Errorf("zmtp: a %s socket does not talk to a %s socket", ours, peer)
	}
	return peer, nil
}

func appendProperty(b []byte, name, value string) []byte {
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// parseCommand splits a command frame into its name and data.
func parseCommand(body []byte) (string, []byte, error) {
	if len(body) < 1 || int(body[0]) > len(body)-1 {
		return "", nil, errors.New("zmtp: malformed command")
	}
	n := int(body[0])
	return string(body[1 : 1+n]), body[1+n:], nil
}

// parseProperties reads READY's metadata; names are case-insensitive
// and returned lower-cased.
func parseProperties(b []byte) (map[string]string, error) {
	props := map[string]string{}
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n+4 {
			return nil, errors.New("zmtp: malformed READY property")
		}
		name := string(b[1 : 1+n])
		b = b[1+n:]
		vn := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(vn) > uint64(len(b)) {
			return nil, errors.New("zmtp: malformed READY property value")
		}
		props[lower(name)] = string(b[:vn])
		b = b[vn:]
	}
	return props, nil
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// readFrame reads one frame, refusing one declared larger than max
// before allocating for it.
func readFrame(r io.Reader, max int) (flags byte, body []byte, err error) {
	var hdr [9]byte
	if _, err := io.ReadFull(r, hdr[:2]); err != nil {
		return 0, nil, err
	}
	flags = hdr[0]
	if flags&^flagsKnown != 0 {
		return 0, nil, fmt.Errorf("zmtp: reserved frame flags %#x", flags)
	}
	if flags&flagCommand != 0 && flags&flagMore != 0 {
		return 0, nil, errors.New("zmtp: command frame with MORE set")
	}
	size := uint64(hdr[1])
	if flags&flagLong != 0 {
		if _, err := io.ReadFull(r, hdr[2:9]); err != nil {
			return 0, nil, err
		}
		size = binary.BigEndian.Uint64(hdr[1:9])
	}
	if size > uint64(max) {
		return 0, nil, fmt.Errorf("%w: %d bytes declared, cap %d", errFrameTooLarge, size, max)
	}
	body = make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return flags, body, nil
}

// message is what a peer sent: a command (one frame) or a message.
type message struct {
	command bool
	frames  [][]byte
}

// readMessage reads one command or multi-frame message, at most
// maxFrame bytes a frame and maxTotal bytes in all.
func readMessage(r io.Reader, maxFrame, maxTotal int) (message, error) {
	var m message
	total := 0
	for {
		fl, body, err := readFrame(r, min(maxFrame, maxTotal-total))
		if err != nil {
			return m, err
		}
		if fl&flagCommand != 0 {
			if len(m.frames) > 0 {
				return m, errors.New("zmtp: command inside a message")
			}
			return message{command: true, frames: [][]byte{body}}, nil
		}
		total += len(body)
		m.frames = append(m.frames, body)
		if fl&flagMore == 0 {
			return m, nil
		}
		if len(m.frames) == maxFramesPerMessage {
			return m, fmt.Errorf("zmtp: message of more than %d frames", maxFramesPerMessage)
		}
	}
}

func frameHeader(flags byte, size int) []byte {
	if size > 255 {
		h := make([]byte, 9)
		h[0] = flags | flagLong
		binary.BigEndian.PutUint64(h[1:], uint64(size))
		return h
	}
	return []byte{flags, byte(size)}
}

// wireMessage lays frames out for one vectored write.
func wireMessage(frames ...[]byte) net.Buffers {
	bufs := make(net.Buffers, 0, 2*len(frames))
	for i, f := range frames {
		var fl byte
		if i < len(frames)-1 {
			fl = flagMore
		}
		bufs = append(bufs, frameHeader(fl, len(f)))
		if len(f) > 0 {
			bufs = append(bufs, f)
		}
	}
	return bufs
}

// wireCommand lays out a command frame.
func wireCommand(name string, data []byte) net.Buffers {
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, data...)
	return net.Buffers{frameHeader(flagCommand, len(body)), body}
}

// pong answers a PING command's data (a 2-byte TTL and up to 16 bytes
// of context) with PONG and the same context.
func pong(ping []byte) net.Buffers {
	var ctx []byte
	if len(ping) > 2 {
		ctx = ping[2:]
		if len(ctx) > 16 {
			ctx = ctx[:16]
		}
	}
	return wireCommand("PONG", ctx)
}
