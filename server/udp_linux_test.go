package server

import (
	"net"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A reply the kernel refuses (here: to port 0) costs only itself: the
// replies queued before and after it in the same sendmmsg are sent
// (with a source address, as on a wildcard listener).
func TestSendmmsgSkipsRefusedReply(t *testing.T) {
	s := New(Options{Resolver: &fixedResolver{}, Observer: nopObserver{}})
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rc, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	r := s.newUDPReader(&unit{}, srv, rc)
	b := newUDPBatch()
	cport := client.LocalAddr().(*net.UDPAddr).Port
	for i, port := range []int{cport, cport, 0, cport, 0, cport} {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&b.from[i]))
		sa.Family = unix.AF_INET
		sa.Addr = [4]byte{127, 0, 0, 1}
		sa.Port = uint16(port>>8) | uint16(port&0xff)<<8 // network order
		b.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
		from, ok := sockaddrAddrPort(&b.from[i], unix.SizeofSockaddrInet4)
		if !ok {
			t.Fatal("bad test address")
		}
		var sc scratch
		sc.pack = s.packs.Get().(*[]byte)
		out := append((*sc.pack)[:0], byte('a'+i))
		s.handlers.Add(1)
		if !r.queue(b, i, &sc, out, from, from.Addr(), 0, nil) {
			t.Fatal("reply not queued")
		}
		if sc.pack != nil {
			t.Fatal("pack buffer still on the scratch")
		}
	}
	r.w.mu.Lock()
	r.flush()
	r.w.mu.Unlock()
	if r.w.n != 0 {
		t.Fatalf("%d replies left queued", r.w.n)
	}
	buf := make([]byte, 16)
	var got []byte
	for range 4 {
		_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := client.Read(buf)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != "abdf" {
		t.Errorf("received %q, want abdf", got)
	}
}
