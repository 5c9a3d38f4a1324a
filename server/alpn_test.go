package server

import (
	"crypto/tls"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
)

// TestTLSListenerALPN: a tls:// listener selects ALPN "dot" for clients
// that offer it (XoT clients such as BIND's fail without it), and still
// answers clients that offer no ALPN, or only other protocols.
func TestTLSListenerALPN(t *testing.T) {
	srvTLS, cliTLS := selfSigned(t)
	res := &fakeResolver{}
	ts := startServer(t, res, []config.Listen{{Proto: "tls", Addr: "127.0.0.1:0"}}, Settings{TLS: srvTLS})
	addr := ts.addr(t, "tcp")
	for _, tc := range []struct {
		offer []string
		want  string
	}{
		{[]string{"dot"}, "dot"},
		{[]string{"h2", "dot"}, "dot"},
		{nil, ""},
		{[]string{"h2"}, ""},
	} {
		conf := cliTLS.Clone()
		conf.NextProtos = tc.offer
		c, err := tls.Dial("tcp", addr, conf)
		if err != nil {
			t.Fatalf("offer %v: handshake: %v", tc.offer, err)
		}
		if got := c.ConnectionState().NegotiatedProtocol; got != tc.want {
			t.Errorf("offer %v: negotiated %q, want %q", tc.offer, got, tc.want)
		}
		dc := &dns.Conn{Conn: c}
		m := query("a.example.", dns.TypeA)
		if err := dc.WriteMsg(m); err != nil {
			t.Fatalf("offer %v: write: %v", tc.offer, err)
		}
		if _, err := dc.ReadMsg(); err != nil {
			t.Errorf("offer %v: no answer: %v", tc.offer, err)
		}
		c.Close()
	}
}
