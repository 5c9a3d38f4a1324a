package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources/etcd/etcdtest"
)

// Zone transfers through the built binary, with miekg/dns clients.

const xfrSecret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtMzItYnl0ZXMhIQ=="

const xfrCfg = `listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - hosts: {files: [big.hosts], entries: ["10.0.0.1 www"]}
  signed.internal:
    - hosts: {files: [signed.hosts], entries: ["10.0.1.1 a", "10.0.1.2 b"]}
  other.internal:
    - hosts: {entries: ["10.0.2.1 b"]}
  denied.internal:
    - hosts: {entries: ["10.0.3.1 c"]}
  file.internal:
    - file: {path: file.zone}
  mixed.internal:
    - file: {records: ["@ SOA ns1 admin 77 7200 600 86400 60", "www A 10.0.4.1"]}
    - hosts: {entries: ["10.0.4.2 db"]}
transfer:
  - zones: [file.internal, mixed.internal]
    allow: [127.0.0.1]
  - zones: [example.internal]
    allow: [127.0.0.0/8]
  - zones: [signed.internal]
    allow: [127.0.0.0/8]
    tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
  - zones: [denied.internal]
    allow: [10.0.0.0/8]
`

// bigHosts is a hosts file of n names in zone.
func bigHosts(n int, zone string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "10.%d.%d.%d h%d.%s\n", 1+i>>16, (i>>8)&0xff, i&0xff, i, zone)
	}
	return b.String()
}

// axfr transfers zone from addr; it returns the records and the number
// of messages.
func axfr(t *testing.T, addr, zone string, qtype uint16, serial uint32, key string) ([]dns.RR, int, error) {
	t.Helper()
	m := new(dns.Msg)
	if qtype == dns.TypeIXFR {
		m.SetIxfr(zone, serial, "ns.", "mbox.")
	} else {
		m.SetAxfr(zone)
	}
	tr := &dns.Transfer{ReadTimeout: 10 * time.Second}
	if key != "" {
		m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
		tr.TsigSecret = map[string]string{"xfr-key.": key}
	}
	ch, err := tr.In(m, addr)
	if err != nil {
		return nil, 0, err
	}
	var rrs []dns.RR
	n := 0
	for env := range ch {
		if env.Error != nil {
			return rrs, n, env.Error
		}
		n++
		rrs = append(rrs, env.RR...)
	}
	return rrs, n, nil
}

// rawSigned sends m signed with (name, secret) over TCP and returns the
// unverified response (miekg's client would reject an unsigned one).
func rawSigned(t *testing.T, addr string, m *dns.Msg, name, secret string) *dns.Msg {
	t.Helper()
	r, _, _ := rawSignedAt(t, addr, m, name, secret, time.Now().Unix())
	return r
}

// rawSignedAt is rawSigned with the signature's time; it also returns the
// response's wire form and the request's MAC, to verify the response.
func rawSignedAt(t *testing.T, addr string, m *dns.Msg, name, secret string, at int64) (*dns.Msg, []byte, string) {
	t.Helper()
	m.SetTsig(name, dns.HmacSHA256, 300, at)
	wire, mac, err := dns.TsigGenerate(m, secret, "", false)
	if err != nil {
		t.Fatal(err)
	}
	r, resp := rawExchange(t, addr, wire)
	return r, resp, mac
}

// tsigResponseValid checks the HMAC-SHA256 MAC of a signed response
// (wire, its TSIG record ts) to a request whose MAC was requestMAC, by
// RFC 8945 section 4.3.3 - by hand: miekg/dns will not verify a NOTAUTH
// message.
func tsigResponseValid(t *testing.T, wire []byte, ts *dns.TSIG, secret, requestMAC string) bool {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(secret)
	if err != nil {
		t.Fatal(err)
	}
	reqMAC, _ := hex.DecodeString(requestMAC)
	msg := slices.Clone(wire[:len(wire)-dns.Len(ts)]) // the TSIG record is last, uncompressed
	binary.BigEndian.PutUint16(msg[0:], ts.OrigId)
	binary.BigEndian.PutUint16(msg[10:], binary.BigEndian.Uint16(msg[10:])-1)
	name := func(n string) []byte {
		b := make([]byte, 256)
		off, err := dns.PackDomainName(dns.CanonicalName(n), b, 0, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		return b[:off]
	}
	other, _ := hex.DecodeString(ts.OtherData)
	var vars []byte
	vars = append(vars, name(ts.Hdr.Name)...)
	vars = binary.BigEndian.AppendUint16(vars, dns.ClassANY)
	vars = binary.BigEndian.AppendUint32(vars, 0)
	vars = append(vars, name(ts.Algorithm)...)
	vars = append(vars, byte(ts.TimeSigned>>40), byte(ts.TimeSigned>>32), byte(ts.TimeSigned>>24), byte(ts.TimeSigned>>16), byte(ts.TimeSigned>>8), byte(ts.TimeSigned))
	vars = binary.BigEndian.AppendUint16(vars, ts.Fudge)
	vars = binary.BigEndian.AppendUint16(vars, ts.Error)
	vars = binary.BigEndian.AppendUint16(vars, uint16(len(other)))
	vars = append(vars, other...)
	h := hmac.New(sha256.New, key)
	h.Write(binary.BigEndian.AppendUint16(nil, uint16(len(reqMAC))))
	h.Write(reqMAC)
	h.Write(msg)
	h.Write(vars)
	return hex.EncodeToString(h.Sum(nil)) == strings.ToLower(ts.MAC)
}

// rawExchange sends one message over TCP and reads one back.
func rawExchange(t *testing.T, addr string, wire []byte) (*dns.Msg, []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := binary.BigEndian.AppendUint16(nil, uint16(len(wire)))
	if _, err := c.Write(append(buf, wire...)); err != nil {
		t.Fatal(err)
	}
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatal(err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(resp); err != nil {
		t.Fatal(err)
	}
	return r, resp
}

func TestTransferProtocol(t *testing.T) {
	const n = 100000
	s := startYAML(t, xfrCfg, map[string]string{"big.hosts": bigHosts(n, "example.internal"), "signed.hosts": bigHosts(5000, "signed.internal"),
		"file.zone": "$TTL 300\n@ IN SOA ns1 admin 2024010101 7200 600 86400 60\n@ IN NS ns1\nwww IN A 10.0.5.1\nmail IN MX 10 mx\n", "xfr.key": xfrSecret + "\n"})

	t.Run("AXFR of 100000 names in several messages", func(t *testing.T) {
		start := time.Now()
		rrs, msgs, err := axfr(t, s.addr, "example.internal.", dns.TypeAXFR, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d records in %d messages, %s", len(rrs), msgs, time.Since(start))
		soa1, ok1 := rrs[0].(*dns.SOA)
		soa2, ok2 := rrs[len(rrs)-1].(*dns.SOA)
		if !ok1 || !ok2 || soa1.Serial != soa2.Serial {
			t.Fatalf("first and last records are not the same SOA: %v ... %v", rrs[0], rrs[len(rrs)-1])
		}
		if soa1.Refresh != 14400 || soa1.Retry != 3600 || soa1.Expire != 1209600 {
			t.Errorf("SOA timers %d/%d/%d, want 14400/3600/1209600", soa1.Refresh, soa1.Retry, soa1.Expire)
		}
		a, ns := 0, 0
		for _, rr := range rrs {
			switch rr.Header().Rrtype {
			case dns.TypeA:
				a++
			case dns.TypeNS:
				ns++
			}
		}
		// n hosts names, www and the synthesized ns.dns.example.internal.
		if a != n+2 || ns != 1 {
			t.Errorf("%d A and %d NS records, want %d and 1", a, ns, n+2)
		}
		if msgs < 2 {
			t.Errorf("%d messages, want several", msgs)
		}
	})

	t.Run("IXFR", func(t *testing.T) {
		rrs, _, err := axfr(t, s.addr, "example.internal.", dns.TypeIXFR, 1, "")
		if err != nil || len(rrs) < 100 {
			t.Fatalf("IXFR from serial 1: %d records, %v", len(rrs), err)
		}
		cur := rrs[0].(*dns.SOA).Serial
		for _, serial := range []uint32{cur, cur + 1} {
			rrs, _, err = axfr(t, s.addr, "example.internal.", dns.TypeIXFR, serial, "")
			if err != nil || len(rrs) != 1 || rrs[0].(*dns.SOA).Serial != cur {
				t.Fatalf("IXFR from serial %d (ours %d): %v, %v; want our SOA alone", serial, cur, rrs, err)
			}
		}
	})

	t.Run("TSIG", func(t *testing.T) {
		rrs, msgs, err := axfr(t, s.addr, "signed.internal.", dns.TypeAXFR, 0, xfrSecret)
		if err != nil {
			t.Fatalf("signed AXFR: %v", err)
		}
		if len(rrs) != 5006 || msgs < 2 { // SOA, 5000 names, a, b, NS, ns.dns A, SOA
			t.Errorf("signed AXFR: %d records in %d messages, want 5006 in several", len(rrs), msgs)
		}
		if _, _, err := axfr(t, s.addr, "signed.internal.", dns.TypeAXFR, 0, ""); err == nil || !strings.Contains(err.Error(), "REFUSED") && !strings.Contains(err.Error(), "5") {
			t.Errorf("unsigned AXFR of a zone with a key: %v, want REFUSED", err)
		}
		m := new(dns.Msg)
		m.SetAxfr("signed.internal.")
		r := rawSigned(t, s.addr, m, "other-key.", xfrSecret)
		if ts := r.IsTsig(); r.Rcode != dns.RcodeNotAuth || ts == nil || ts.Error != dns.RcodeBadKey || ts.MAC != "" {
			t.Errorf("wrong key name: %v, want NOTAUTH with an unsigned BADKEY", r)
		}
		m = new(dns.Msg)
		m.SetAxfr("signed.internal.")
		r = rawSigned(t, s.addr, m, "xfr-key.", "b3RoZXIgc2VjcmV0")
		if ts := r.IsTsig(); r.Rcode != dns.RcodeNotAuth || ts == nil || ts.Error != dns.RcodeBadSig || ts.MAC != "" {
			t.Errorf("wrong secret: %v, want NOTAUTH with an unsigned BADSIG", r)
		}
		// A good signature an hour off: BADTIME, signed over the request's
		// MAC, with the server's time (RFC 8945 section 5.2.3); for a
		// transfer and for a signed SOA query.
		for _, qt := range []uint16{dns.TypeAXFR, dns.TypeSOA} {
			m = new(dns.Msg)
			m.SetQuestion("signed.internal.", qt)
			r, wire, mac := rawSignedAt(t, s.addr, m, "xfr-key.", xfrSecret, time.Now().Unix()-3600)
			ts := r.IsTsig()
			if r.Rcode != dns.RcodeNotAuth || ts == nil || ts.Error != dns.RcodeBadTime || ts.MAC == "" || ts.OtherLen != 6 {
				t.Fatalf("%s an hour off: %v, want NOTAUTH with a signed BADTIME and the server's time", dns.TypeToString[qt], r)
			}
			if !tsigResponseValid(t, wire, ts, xfrSecret, mac) {
				t.Errorf("%s: the BADTIME response's MAC does not verify", dns.TypeToString[qt])
			}
			if at, err := strconv.ParseInt(ts.OtherData, 16, 64); err != nil || at < time.Now().Unix()-60 || at > time.Now().Unix()+60 {
				t.Errorf("%s: BADTIME other data %q, want the server's time", dns.TypeToString[qt], ts.OtherData)
			}
		}
	})

	t.Run("EDNS", func(t *testing.T) {
		// A transfer asked with an OPT gets one in every message
		// (RFC 6891 section 6.1.1), as any other answer does.
		m := new(dns.Msg)
		m.SetAxfr("file.internal.")
		m.SetEdns0(1232, false)
		wire, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		r, _ := rawExchange(t, s.addr, wire)
		if r.Rcode != dns.RcodeSuccess || r.IsEdns0() == nil || len(r.Answer) == 0 {
			t.Errorf("AXFR with EDNS: %v, want an answer with an OPT", r)
		}
	})

	t.Run("signed SOA query", func(t *testing.T) {
		// Secondaries check the serial with a signed SOA query.
		for _, netw := range []string{"udp", "tcp"} {
			c := &dns.Client{Net: netw, Timeout: 2 * time.Second, TsigSecret: map[string]string{"xfr-key.": xfrSecret}}
			m := new(dns.Msg)
			m.SetQuestion("signed.internal.", dns.TypeSOA)
			m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
			r, _, err := c.Exchange(m, s.addr)
			if err != nil || len(r.Answer) != 1 || r.IsTsig() == nil {
				t.Errorf("signed SOA query over %s: %v %v", netw, r, err)
			}
		}
		m := new(dns.Msg)
		m.SetQuestion("signed.internal.", dns.TypeSOA)
		r := rawSigned(t, s.addr, m, "other-key.", xfrSecret)
		if ts := r.IsTsig(); r.Rcode != dns.RcodeNotAuth || ts == nil || ts.Error != dns.RcodeBadKey {
			t.Errorf("SOA query signed with an unknown key: %v, want NOTAUTH/BADKEY", r)
		}
	})

	t.Run("zone file", func(t *testing.T) {
		// A zone served by one zone file alone keeps the file's SOA (its
		// serial is the operator's); with another local source the SOA is
		// dnsd's own.
		rrs, _, err := axfr(t, s.addr, "file.internal.", dns.TypeAXFR, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if soa := rrs[0].(*dns.SOA); soa.Serial != 2024010101 || soa.Ns != "ns1.file.internal." || rrs[len(rrs)-1].(*dns.SOA).Serial != 2024010101 {
			t.Errorf("file zone SOA %v, want the file's", soa)
		}
		var got []string
		for _, rr := range rrs[1 : len(rrs)-1] {
			got = append(got, strings.Join(strings.Fields(rr.String()), " "))
		}
		slices.Sort(got)
		want := "file.internal. 300 IN NS ns1.file.internal.|mail.file.internal. 300 IN MX 10 mx.file.internal.|www.file.internal. 300 IN A 10.0.5.1"
		if strings.Join(got, "|") != want {
			t.Errorf("file zone records %q, want %q", got, want)
		}
		rrs, _, err = axfr(t, s.addr, "mixed.internal.", dns.TypeAXFR, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		// A zone file beside another source: its SOA with dnsd's serial.
		if soa := rrs[0].(*dns.SOA); soa.Serial == 77 || soa.Ns != "ns1.mixed.internal." || soa.Mbox != "admin.mixed.internal." {
			t.Errorf("file+hosts zone SOA %v, want the file's with dnsd's serial", soa)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct{ netw, zone string }{
			{"udp", "example.internal."},    // never over UDP
			{"tcp", "denied.internal."},     // client outside allow
			{"tcp", "other.internal."},      // zone not listed
			{"tcp", "h1.example.internal."}, // not a zone apex
			{"tcp", "nowhere.example.org."}, // no zone at all
		} {
			for _, qt := range []uint16{dns.TypeAXFR, dns.TypeIXFR} {
				m := new(dns.Msg)
				m.SetQuestion(tc.zone, qt)
				r := dnstest.Exchange(t, tc.netw, s.addr, m)
				if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
					t.Errorf("%s %s over %s: %s with %d records, want REFUSED", dns.TypeToString[qt], tc.zone, tc.netw, dns.RcodeToString[r.Rcode], len(r.Answer))
				}
			}
		}
	})

	t.Run("the connection goes on after a transfer", func(t *testing.T) {
		c, err := dns.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m := new(dns.Msg)
		m.SetAxfr("example.internal.")
		if err := c.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		for soas := 0; soas < 2; {
			r, err := c.ReadMsg()
			if err != nil || r.Rcode != dns.RcodeSuccess {
				t.Fatalf("transfer: %v %v", r, err)
			}
			for _, rr := range r.Answer {
				if rr.Header().Rrtype == dns.TypeSOA {
					soas++
				}
			}
		}
		q := new(dns.Msg)
		q.SetQuestion("a.signed.internal.", dns.TypeA)
		if err := c.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
		if r, err := c.ReadMsg(); err != nil || len(r.Answer) != 1 {
			t.Fatalf("query after the transfer on the same connection: %v %v", r, err)
		}
	})

	// The transfer settings reload with the zones: without the item, the
	// zone is no longer transferred.
	s.reload(t, strings.Replace(xfrCfg, "  - zones: [example.internal]\n    allow: [127.0.0.0/8]\n", "", 1), true, 1)
	m := new(dns.Msg)
	m.SetAxfr("example.internal.")
	if r := dnstest.Exchange(t, "tcp", s.addr, m); r.Rcode != dns.RcodeRefused {
		t.Errorf("AXFR after the reload dropped the transfer item: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}

	_, body := httpGet(t, s.base+"/metrics")
	for _, want := range []string{
		`dnsd_transfers_total{result="success",zone="example.internal."}`,
		`dnsd_transfers_total{result="success",zone="signed.internal."}`,
		`dnsd_transfers_total{result="notauth",zone="signed.internal."} 3`, // BADKEY, BADSIG, BADTIME
		`dnsd_transfers_total{result="refused",zone="denied.internal."}`,
		`dnsd_transfers_total{result="refused",zone="none"}`,
		// Over UDP: refused, and counted under the listed zone.
		`dnsd_transfers_total{result="refused",zone="example.internal."} 2`,
		`dnsd_requests_total{proto="udp",qtype="AXFR",view="default",zone="example.internal."} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s\n%s", want, grep(body, "dnsd_transfers_total"))
		}
	}
}

// stalledTransfer starts an AXFR of zone over a connection with a small
// receive buffer, reads its first message (the server is sending) and
// then reads nothing more: the transfer stays in flight until the
// connection is closed.
func stalledTransfer(t *testing.T, addr, zone string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	dc := &dns.Conn{Conn: c}
	m := new(dns.Msg)
	m.SetAxfr(zone)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := dc.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	r, err := dc.ReadMsg()
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		t.Fatalf("first message of a transfer of %s: %v %v", zone, r, err)
	}
	_ = c.SetDeadline(time.Time{})
	return c
}

// A record too large for one transfer message (a 1 MB TXT value, which
// etcd accepts) is left out of transfers with a warning naming it, once
// per zone version; the zone's other records are transferred, by AXFR
// and IXFR alike.
func TestTransferOversizedRecord(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	srv.Put("/skydns/internal/example/www", `{"host":"10.0.1.1"}`)
	srv.Put("/skydns/internal/example/db", `{"host":"10.0.1.2"}`)
	srv.Put("/skydns/internal/example/big", `{"text":"`+strings.Repeat("x", 1<<20)+`"}`)
	s := startYAML(t, `listen: ["LISTEN"]
http: "HTTP"
zones:
  example.internal:
    - etcd: {endpoints: [`+srv.Endpoint()+`], prefix: /skydns, sync_timeout: 10s}
transfer:
  - zones: [example.internal]
    allow: [127.0.0.0/8]
`, nil)
	s.waitLog("etcd prefix read", 1)
	waitAnswer(t, s.addr, "db.example.internal", dns.TypeA, "NOERROR:10.0.1.2")

	names := func(rrs []dns.RR) string {
		var out []string
		for _, rr := range rrs {
			out = append(out, rr.Header().Name+" "+dns.TypeToString[rr.Header().Rrtype])
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	const want = "db.example.internal. A,example.internal. A,example.internal. NS,example.internal. SOA,example.internal. SOA,ns.dns.example.internal. A,www.example.internal. A"
	for _, qt := range []uint16{dns.TypeAXFR, dns.TypeAXFR, dns.TypeIXFR} {
		rrs, _, err := axfr(t, s.addr, "example.internal.", qt, 1, "")
		if err != nil {
			t.Fatalf("%s with a 1 MB record in the zone: %v", dns.TypeToString[qt], err)
		}
		// The zone's apex address record comes from the etcd source's
		// apex handling; compare owners and types without it.
		got := names(slices.DeleteFunc(rrs, func(rr dns.RR) bool {
			return rr.Header().Name == "example.internal." && rr.Header().Rrtype == dns.TypeA
		}))
		w := strings.Replace(want, "example.internal. A,", "", 1)
		if got != w {
			t.Errorf("%s: %s\nwant %s", dns.TypeToString[qt], got, w)
		}
	}
	const warning = "zone transfer leaves out a record too large for one transfer message"
	s.waitLog(warning, 1)
	logs := s.stderr.String()
	if n := strings.Count(logs, warning); n != 1 {
		t.Errorf("the warning was logged %d times for three transfers of one zone version, want 1", n)
	}
	if line := grep(logs, warning); !strings.Contains(line, "zone=example.internal.") || !strings.Contains(line, "owner=big.example.internal.") || !strings.Contains(line, "level=WARN") {
		t.Errorf("the warning does not name the zone and owner at WARN: %s", line)
	}
	if v := metricValue(scrape(t, s.base), "dnsd_transfers_total", `result="error"`); v > 0 {
		t.Errorf("dnsd_transfers_total{result=\"error\"} = %v", v)
	}

	// A new version of the zone says it again.
	srv.Put("/skydns/internal/example/new", `{"host":"10.0.1.3"}`)
	waitAnswer(t, s.addr, "new.example.internal", dns.TypeA, "NOERROR:10.0.1.3")
	if _, _, err := axfr(t, s.addr, "example.internal.", dns.TypeAXFR, 0, ""); err != nil {
		t.Fatal(err)
	}
	s.waitLog(warning, 2)
	s.stop(syscall.SIGTERM)
}

// limits.max_transfers transfers are sent at once; one more is SERVFAIL
// with an EDE naming the limit, counted as result="busy"; a reload
// raises the limit for the next transfer.
func TestTransferLimit(t *testing.T) {
	cfg := `listen: ["LISTEN"]
http: "HTTP"
limits: {max_transfers: 2, tcp_idle_timeout: 60s}
zones:
  example.internal:
    - hosts: {files: [big.hosts]}
  small.internal:
    - hosts: {entries: ["10.0.9.1 a"]}
transfer:
  - zones: [example.internal, small.internal]
    allow: [127.0.0.0/8]
`
	s := startYAML(t, cfg, map[string]string{"big.hosts": bigHosts(300000, "example.internal")})
	waitAnswer(t, s.addr, "h7.example.internal", dns.TypeA, "NOERROR:10.1.0.7")
	stalledTransfer(t, s.addr, "example.internal.")
	stalledTransfer(t, s.addr, "example.internal.")

	m := new(dns.Msg)
	m.SetAxfr("small.internal.")
	m.SetEdns0(1232, false)
	r := dnstest.Exchange(t, "tcp", s.addr, m)
	var ede *dns.EDNS0_EDE
	if o := r.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				ede = e
			}
		}
	}
	if r.Rcode != dns.RcodeServerFailure || len(r.Answer) != 0 || ede == nil || !strings.Contains(ede.ExtraText, "max_transfers") {
		t.Fatalf("a third transfer with max_transfers 2: %s, %d records, EDE %v; want SERVFAIL naming max_transfers", dns.RcodeToString[r.Rcode], len(r.Answer), ede)
	}
	if v := metricValue(scrape(t, s.base), "dnsd_transfers_total", `result="busy",zone="small.internal."`); v != 1 {
		t.Errorf(`dnsd_transfers_total{result="busy",zone="small.internal."} = %v, want 1`, v)
	}
	// Queries are answered meanwhile.
	waitAnswer(t, s.addr, "a.small.internal", dns.TypeA, "NOERROR:10.0.9.1")

	s.reload(t, strings.Replace(cfg, "max_transfers: 2", "max_transfers: 3", 1), true, 1)
	if rrs, _, err := axfr(t, s.addr, "small.internal.", dns.TypeAXFR, 0, ""); err != nil || len(rrs) < 3 {
		t.Fatalf("a third transfer after the reload raised max_transfers to 3: %d records, %v", len(rrs), err)
	}
	s.stop(syscall.SIGTERM)
}

// A stop ends transfers in flight: with a secondary that stopped reading
// a large zone's transfer, dnsd exits 0 at once, not at the stop's
// 10 s deadline.
func TestTransferStop(t *testing.T) {
	s := startYAML(t, `listen: ["LISTEN"]
http: "HTTP"
limits: {tcp_idle_timeout: 60s}
zones:
  example.internal:
    - hosts: {files: [big.hosts]}
transfer:
  - zones: [example.internal]
    allow: [127.0.0.0/8]
`, map[string]string{"big.hosts": bigHosts(300000, "example.internal")})
	waitAnswer(t, s.addr, "h7.example.internal", dns.TypeA, "NOERROR:10.1.0.7")
	stalledTransfer(t, s.addr, "example.internal.")
	stalledTransfer(t, s.addr, "example.internal.")
	start := time.Now()
	s.stop(syscall.SIGTERM)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop with transfers in flight took %v", d)
	}
	s.waitLog("zone transfer ended by the stop", 2)
}

// TestReloadKeepsUnchangedSerial: a SIGHUP that changes nothing in a
// transferred zone leaves its serial as it was and sends its secondaries
// no NOTIFY (each would cost them a transfer); one that changes the
// zone's data raises the serial and notifies.
func TestReloadKeepsUnchangedSerial(t *testing.T) {
	sec := dnstest.StartSecondary(t, 0)
	dir := t.TempDir()
	port, hport := freePort(t), freePort(t)
	conf := func(inline string) {
		writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
http: "127.0.0.1:%d"
zones:
  example.internal:
    - hosts: {files: [a.hosts], entries: [%q]}
  lab.internal:
    - hosts: {entries: ["10.1.0.1 gw"]}
transfer:
  - zones: [example.internal]
    allow: [127.0.0.1]
    notify: [%q]
`, port, hport, inline, sec.Addr))
	}
	writeFile(t, filepath.Join(dir, "a.hosts"), "10.0.0.9 f.example.internal\n")
	conf("10.0.0.1 inline")
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	serialOf := func(zone string) uint32 {
		t.Helper()
		r := dnstest.Ask(t, addr, zone, dns.TypeSOA)
		if len(r.Answer) != 1 {
			t.Fatalf("SOA: %v", r)
		}
		return r.Answer[0].(*dns.SOA).Serial
	}
	serial := func() uint32 { return serialOf("example.internal.") }
	dnstest.Eventually(t, "a NOTIFY at start", 10*time.Second, func() bool { return len(sec.Serials()) > 0 })
	if got := sec.Serials(); len(got) != 1 {
		t.Fatalf("NOTIFYs at start: %v, want one", got)
	}
	s1, lab := serial(), serialOf("lab.internal.")

	time.Sleep(1100 * time.Millisecond) // a new second: the clock would give a new serial
	d.signal(syscall.SIGHUP)
	d.waitLog("reloaded", 1)
	if s := serial(); s != s1 {
		t.Errorf("after a reload that changed nothing: serial %d, want %d as before", s, s1)
	}
	if s := serialOf("lab.internal."); s != lab {
		t.Errorf("after a reload that changed nothing: serial of a zone not transferred %d, want %d as before", s, lab)
	}
	time.Sleep(7 * time.Second) // NOTIFYs of a zone are at most 5 s apart, checked every second
	if got := sec.Serials(); len(got) != 1 {
		t.Errorf("NOTIFYs after a reload that changed nothing: %v, want only the one at start", got)
	}

	conf("10.0.0.2 inline")
	d.signal(syscall.SIGHUP)
	d.waitLog("reloaded", 2)
	s2 := serial()
	if !pipeline.SerialLess(s1, s2) {
		t.Errorf("after a reload that changed an entry: serial %d, want above %d", s2, s1)
	}
	dnstest.Eventually(t, "a second NOTIFY", 10*time.Second, func() bool { return len(sec.Serials()) >= 2 })
	if got := sec.Serials(); len(got) != 2 || got[1] != s2 {
		t.Errorf("NOTIFYs after a reload that changed the zone: %v, want a second one with %d", got, s2)
	}
}
