package e2e

// End-to-end test of pipelined queries over TCP and DNS over TLS through
// the built binary: a real upstream that is slow for one name, a forward
// source, local names from hosts.

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// TestPipelinedTCPAndTLS: over one TCP connection, and over one DoT
// connection, a query the upstream answers after 1.5 s and then ten local
// queries: the ten answers arrive first (out of order, well within 1 s),
// each with its query's ID, and the slow one last.
func TestPipelinedTCPAndTLS(t *testing.T) {
	up := dnstest.StartUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if strings.HasPrefix(r.Question[0].Name, "slow-") {
			time.Sleep(1500 * time.Millisecond)
		}
		dnstest.DefaultAnswer(w, r)
	})
	dir := t.TempDir()
	tcpPort, tlsPort := freePort(t), freePort(t)
	certPEM, keyPEM := selfSigned(t)
	writeFile(t, filepath.Join(dir, "tls.crt"), string(certPEM))
	writeFile(t, filepath.Join(dir, "tls.key"), string(keyPEM))
	hosts := ""
	for i := range 10 {
		hosts += fmt.Sprintf(`"10.0.0.%d fast-%d", `, i+1, i)
	}
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["tcp://127.0.0.1:%d", "tls://127.0.0.1:%d"]
tls: {cert: tls.crt, key: tls.key}
zones:
  example.internal:
    - hosts: {entries: [%s]}
  .:
    - forward: {upstreams: ["%s"], timeout: 3s}
`, tcpPort, tlsPort, hosts, up.Addr))
	p := startDnsd(t, dir)
	p.waitLog("dnsd started", 1)

	for _, tc := range []struct {
		name string
		dial func() (net.Conn, error)
	}{
		{"tcp", func() (net.Conn, error) { return net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", tcpPort)) }},
		{"tls", func() (net.Conn, error) {
			return tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", tlsPort), &tls.Config{InsecureSkipVerify: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			send := func(name string, id uint16) {
				t.Helper()
				m := dnstest.Query(name, dns.TypeA)
				m.Id = id
				b, err := m.Pack()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			slow := "slow-" + tc.name + ".example.com" // not cached by the other run
			send(slow, 1)
			for i := range 10 {
				send(fmt.Sprintf("fast-%d.example.internal", i), uint16(100+i))
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			read := func() *dns.Msg {
				t.Helper()
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					t.Fatalf("after %s: %v", time.Since(start), err)
				}
				b := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, b); err != nil {
					t.Fatal(err)
				}
				r := new(dns.Msg)
				if err := r.Unpack(b); err != nil {
					t.Fatal(err)
				}
				return r
			}
			seen := map[uint16]bool{}
			for i := range 10 {
				r := read()
				n := int(r.Id) - 100
				if n < 0 || n >= 10 || seen[r.Id] {
					t.Fatalf("answer %d after %s: id %d %v; want the local answers first", i, time.Since(start), r.Id, r.Question)
				}
				seen[r.Id] = true
				want := fmt.Sprintf("NOERROR:10.0.0.%d", n+1)
				if got := dnstest.RData(r); got != want || r.Question[0].Name != fmt.Sprintf("fast-%d.example.internal.", n) {
					t.Fatalf("answer to id %d: %s %q, want %q", r.Id, r.Question[0].Name, got, want)
				}
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("local answers took %s behind the slow query", d)
			}
			r := read()
			if r.Id != 1 || dnstest.RData(r) != "NOERROR:192.0.2.1" || r.Question[0].Name != slow+"." {
				t.Fatalf("last answer: id %d %v %s", r.Id, r.Question, dnstest.RData(r))
			}
			if d := time.Since(start); d < 1400*time.Millisecond {
				t.Errorf("the slow answer came after %s, before the upstream answered", d)
			}
		})
	}
}
