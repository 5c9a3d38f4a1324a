//go:build !linux

package server

import (
	"net"
	"net/netip"
	"syscall"
)

// Without IP_PKTINFO support replies on wildcard addresses leave from the
// address the routing table picks.
const pktinfoSupported = false

type oobBuf [16]uint64

func (b *oobBuf) bytes() []byte { return nil }

func enablePktinfo(string, syscall.RawConn) error { return nil }

func parsePktinfo([]byte) (netip.Addr, uint32, bool) { return netip.Addr{}, 0, false }

func srcPktinfo(*oobBuf, netip.Addr, uint32) []byte { return nil }

// readUDP reads one datagram per system call (no recvmmsg here).
func (s *Server) readUDP(u *unit, conn *net.UDPConn) { s.readUDPEach(u, conn) }

func newBatchAny() any { return nil }

// udpReader is Linux's batch reader; here there is none, and the
// watchdog's list of them stays empty.
type udpReader struct{ busy answering }

func (r *udpReader) answers() *answering { return &r.busy }
func (r *udpReader) takeOver(uint64)     {}
