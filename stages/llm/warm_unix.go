//go:build unix

package llm

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// canPeek: idle can tell a live pooled connection from a dead one here.
const canPeek = true

// idle reports whether c is open with nothing to read: a peek that would
// block. A closed connection reads end-of-file; one the endpoint wrote to
// unasked has bytes waiting. Either would fail or confuse the call sent on
// it, which the transport would not retry (the connection is new to it).
func idle(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, rerr := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		open = errors.Is(rerr, unix.EAGAIN)
		return true // one look, never wait
	})
	return err == nil && open
}
