package e2e

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestAnswersAreCompressed: dnsd's answers carry compressed names, as
// long as miekg/dns's compression makes them: a hosts name's A answer over
// UDP (53 bytes, the owner a pointer to the question; 72 as written) and
// a zone file's 40 TXT records over TCP; both parse.
func TestAnswersAreCompressed(t *testing.T) {
	var zone strings.Builder
	zone.WriteString("$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 3600 1209600 60\n@ IN NS ns1\nns1 IN A 10.0.1.53\n")
	for i := range 40 {
		fmt.Fprintf(&zone, "big IN TXT \"record number %d of forty, with some text to it\"\n", i)
	}
	p := start(t, config{Zones: `  example.internal:
    - hosts: {files: [example.hosts]}
  txt.internal:
    - file: {path: txt.internal.zone}
`}, map[string]string{"example.hosts": "10.0.0.10 db.example.internal\n", "txt.internal.zone": zone.String()})
	addr := p.addr

	ask := func(netw, name string, qtype uint16) ([]byte, *dns.Msg) {
		t.Helper()
		q := new(dns.Msg)
		q.SetQuestion(name, qtype)
		wire, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial(netw, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		var raw []byte
		if netw == "udp" {
			if _, err := c.Write(wire); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 65535)
			n, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			raw = buf[:n]
		} else {
			if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(wire))), wire...)); err != nil {
				t.Fatal(err)
			}
			var n [2]byte
			if _, err := io.ReadFull(c, n[:]); err != nil {
				t.Fatal(err)
			}
			raw = make([]byte, binary.BigEndian.Uint16(n[:]))
			if _, err := io.ReadFull(c, raw); err != nil {
				t.Fatal(err)
			}
		}
		r := new(dns.Msg)
		if err := r.Unpack(raw); err != nil {
			t.Fatalf("%s %s over %s: the answer does not parse: %v", name, dns.TypeToString[qtype], netw, err)
		}
		return raw, r
	}
	libraryLen := func(r *dns.Msg, compress bool) int {
		c := r.Copy()
		c.Compress = compress
		b, err := c.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}

	raw, r := ask("udp", "db.example.internal.", dns.TypeA)
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.0.0.10" || r.Truncated {
		t.Fatalf("db.example.internal A: %v", r)
	}
	if want := libraryLen(r, true); len(raw) != want || want != 53 {
		t.Errorf("db.example.internal A over UDP: %d bytes, want %d, compressed (53; %d as written)", len(raw), want, libraryLen(r, false))
	}

	raw, r = ask("tcp", "big.txt.internal.", dns.TypeTXT)
	if len(r.Answer) != 40 {
		t.Fatalf("big.txt.internal TXT over TCP: %d records, want 40", len(r.Answer))
	}
	if want, written := libraryLen(r, true), libraryLen(r, false); len(raw) != want || want >= written {
		t.Errorf("40 TXT over TCP: %d bytes, want %d, compressed (%d as written)", len(raw), want, written)
	}
}
