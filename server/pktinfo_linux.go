package server

import (
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// On a wildcard UDP address (0.0.0.0, ::, or no host) the reply must
// leave from the address the query was sent to, or clients of a
// multi-homed host drop it. The kernel reports that address with
// IP_PKTINFO / IPV6_PKTINFO and we pass it back when sending.

const pktinfoSupported = true

// oobBuf is 8-byte aligned storage for control messages.
type oobBuf [16]uint64

func (b *oobBuf) bytes() []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b)*8) }

// enablePktinfo asks for the destination address of received packets. On
// a dual-stack IPv6 socket both options are set (IPv4-mapped traffic
// reports IP_PKTINFO); an error on the second is ignored.
func enablePktinfo(network string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if network == "udp4" {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// parsePktinfo finds the packet's destination address and interface in
// received control messages.
func parsePktinfo(oob []byte) (dst netip.Addr, ifindex uint32, ok bool) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			return netip.Addr{}, 0, false
		}
		data := oob[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
			return netip.AddrFrom4(pi.Addr), uint32(pi.Ifindex), true
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
			return netip.AddrFrom16(pi.Addr), pi.Ifindex, true
		}
		next := unix.CmsgSpace(l - unix.CmsgLen(0))
		if next > len(oob) {
			break
		}
		oob = oob[next:]
	}
	return netip.Addr{}, 0, false
}

// srcPktinfo writes a control message into b that makes the reply leave
// from src (the query's destination) and returns it.
func srcPktinfo(b *oobBuf, src netip.Addr, ifindex uint32) []byte {
	buf := b.bytes()
	clear(buf)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&buf[0]))
	data := unsafe.Pointer(&buf[unix.CmsgLen(0)])
	if src.Is4() {
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		(*unix.Inet4Pktinfo)(data).Spec_dst = src.As4()
		return buf[:unix.CmsgSpace(unix.SizeofInet4Pktinfo)]
	}
	h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
	pi := (*unix.Inet6Pktinfo)(data)
	pi.Addr = src.As16()
	pi.Ifindex = ifindex
	return buf[:unix.CmsgSpace(unix.SizeofInet6Pktinfo)]
}
