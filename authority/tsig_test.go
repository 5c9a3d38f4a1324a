package authority

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Verify is the one check of a signed request, a transfer's or a
// query's: an unknown key, another key name or algorithm is BADKEY, a
// wrong MAC BADSIG (both unsigned), a good MAC outside the fudge BADTIME
// (signed, with the key), a good one success (signed).
func TestVerify(t *testing.T) {
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQ="
	key := &TSIGKey{Name: "xfr-key.", Algorithm: dns.HmacSHA256, Secret: secret}
	signed := func(name, alg, secret string, at time.Time) (*dns.TSIG, []byte) {
		m := new(dns.Msg)
		m.SetQuestion("example.", dns.TypeSOA)
		m.SetTsig(name, alg, Fudge, at.Unix())
		wire, _, err := dns.TsigGenerate(m, secret, "", false)
		if err != nil {
			t.Fatal(err)
		}
		r := new(dns.Msg)
		if err := r.Unpack(wire); err != nil {
			t.Fatal(err)
		}
		return r.IsTsig(), wire
	}
	now := time.Now()
	for _, tc := range []struct {
		name    string
		key     *TSIGKey
		ts      string
		alg     string
		secret  string
		at      time.Time
		rcode   int
		tsigErr uint16
		signs   bool
	}{
		{"good", key, "xfr-key.", dns.HmacSHA256, secret, now, dns.RcodeSuccess, 0, true},
		{"name in another case", key, "XFR-Key.", dns.HmacSHA256, secret, now, dns.RcodeSuccess, 0, true},
		{"no such key", nil, "xfr-key.", dns.HmacSHA256, secret, now, dns.RcodeNotAuth, dns.RcodeBadKey, false},
		{"another key's name", key, "other.", dns.HmacSHA256, secret, now, dns.RcodeNotAuth, dns.RcodeBadKey, false},
		{"another algorithm", key, "xfr-key.", dns.HmacSHA512, secret, now, dns.RcodeNotAuth, dns.RcodeBadKey, false},
		{"wrong MAC", key, "xfr-key.", dns.HmacSHA256, "b3RoZXI=", now, dns.RcodeNotAuth, dns.RcodeBadSig, false},
		{"an hour old", key, "xfr-key.", dns.HmacSHA256, secret, now.Add(-time.Hour), dns.RcodeNotAuth, dns.RcodeBadTime, true},
	} {
		ts, wire := signed(tc.ts, tc.alg, tc.secret, tc.at)
		c := Verify(tc.key, ts, wire)
		if c.Rcode != tc.rcode || c.Error != tc.tsigErr {
			t.Errorf("%s: rcode %d error %d, want %d %d", tc.name, c.Rcode, c.Error, tc.rcode, tc.tsigErr)
		}
		if tc.signs != (c.Key == key && c.MAC == ts.MAC) || !tc.signs && (c.Key != nil || c.MAC != "") {
			t.Errorf("%s: signs with %v over %q, want signed %t", tc.name, c.Key, c.MAC, tc.signs)
		}
	}
}

// Sign signs a response over the request's MAC; a BADTIME response
// carries the error and the server's time in Other Data, and verifies.
func TestSign(t *testing.T) {
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQ="
	key := &TSIGKey{Name: "xfr-key.", Algorithm: dns.HmacSHA256, Secret: secret}
	q := new(dns.Msg)
	q.SetQuestion("example.", dns.TypeSOA)
	q.SetTsig(key.Name, key.Algorithm, Fudge, time.Now().Unix())
	qwire, mac, err := dns.TsigGenerate(q, secret, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Unpack(qwire); err != nil {
		t.Fatal(err)
	}
	for _, tsigErr := range []uint16{0, dns.RcodeBadTime} {
		m := new(dns.Msg)
		m.SetReply(q)
		wire, err := Sign(m, key, mac, tsigErr)
		if err != nil {
			t.Fatal(err)
		}
		r := new(dns.Msg)
		if err := r.Unpack(wire); err != nil {
			t.Fatal(err)
		}
		ts := r.IsTsig()
		if ts == nil || ts.Error != tsigErr || (tsigErr == dns.RcodeBadTime) != (ts.OtherLen == 6) {
			t.Errorf("error %d: TSIG %v", tsigErr, ts)
		}
		if err := dns.TsigVerify(wire, secret, mac, false); err != nil {
			t.Errorf("error %d: the response does not verify: %v", tsigErr, err)
		}
	}
	// An unsigned error response names the request's key and the error,
	// without a MAC.
	m := WithError(new(dns.Msg).SetRcode(q, dns.RcodeNotAuth), q, q.IsTsig(), dns.RcodeBadKey)
	if ts := m.IsTsig(); ts == nil || ts.Error != dns.RcodeBadKey || ts.MAC != "" || ts.Hdr.Name != key.Name {
		t.Errorf("error response's TSIG %v", ts)
	}
}
