//go:build unix

package main

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the client closed its end of c (or reset
// it): a read that peeks, without waiting, finds the end of the stream.
// Bytes the client sent and the session has not read yet hide a close
// behind them; the session finds it once it reads them.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && rerr == nil || errors.Is(rerr, syscall.ECONNRESET)
		return true // never wait
	})
	return err == nil && closed
}
