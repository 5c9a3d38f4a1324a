package authority

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// TSIG (RFC 8945): the one check of a signed request, for transfers and
// for signed queries (a secondary's SOA check) alike, and the signing of
// their responses.

// TSIGKey is a TSIG key (RFC 8945) in miekg/dns's terms; the sources
// that sign their own requests (secondary) hold the same type.
type TSIGKey = pipeline.TSIGKey

// Fudge is the fudge of dnsd's TSIG signatures, seconds (RFC 8945 §10:
// 300).
const Fudge = 300

// Check is the verdict on a request's TSIG signature.
type Check struct {
	// Rcode is RcodeSuccess (the zero value), or RcodeNotAuth with Error set.
	Rcode int
	// Error is BADKEY (no such key, or another algorithm), BADSIG (a
	// wrong MAC) or BADTIME (a good MAC signed outside the fudge); zero
	// when Rcode is RcodeSuccess.
	Error uint16
	// Key signs the response, covering MAC (the request's): the verified
	// key, and with BADTIME the key whose signature was good (the error
	// is signed, RFC 8945 §5.2.3). Nil: the response is unsigned.
	Key *TSIGKey
	MAC string // empty when Key is nil
}

// Verify checks ts, the TSIG record of the request wire (as received),
// against key, the key it must be signed with (nil: no key of ts's name
// is known).
func Verify(key *TSIGKey, ts *dns.TSIG, wire []byte) Check {
	if key == nil || !strings.EqualFold(dns.Fqdn(ts.Hdr.Name), key.Name) || !strings.EqualFold(ts.Algorithm, key.Algorithm) {
		return Check{Rcode: dns.RcodeNotAuth, Error: dns.RcodeBadKey}
	}
	switch err := dns.TsigVerify(wire, key.Secret, "", false); {
	case err == nil:
		return Check{Rcode: dns.RcodeSuccess, Key: key, MAC: ts.MAC}
	case errors.Is(err, dns.ErrTime):
		return Check{Rcode: dns.RcodeNotAuth, Error: dns.RcodeBadTime, Key: key, MAC: ts.MAC}
	case errors.Is(err, dns.ErrKeyAlg):
		return Check{Rcode: dns.RcodeNotAuth, Error: dns.RcodeBadKey}
	default:
		return Check{Rcode: dns.RcodeNotAuth, Error: dns.RcodeBadSig}
	}
}

// Sign packs the response m signed with key over requestMAC (a TSIG
// record after its other additional records). With tsigErr BADTIME it is
// the error response to a good signature at a bad time: the server's
// time goes in Other Data (RFC 8945 §5.2.3), so that the client can tell
// its clock is off.
func Sign(m *dns.Msg, key *TSIGKey, requestMAC string, tsigErr uint16) ([]byte, error) {
	now := time.Now().Unix()
	m.SetTsig(key.Name, key.Algorithm, Fudge, now)
	if tsigErr == dns.RcodeBadTime {
		t := m.Extra[len(m.Extra)-1].(*dns.TSIG)
		t.Error, t.OtherLen, t.OtherData = dns.RcodeBadTime, 6, fmt.Sprintf("%012x", now)
	}
	out, _, err := dns.TsigGenerate(m, key.Secret, requestMAC, false)
	return out, err
}

// WithError adds to the unsigned error response m, to q signed with ts,
// the TSIG record RFC 8945 §5.2 wants: the request's key and algorithm,
// the error, no MAC. Without an error or a ts, m is left as it is.
func WithError(m, q *dns.Msg, ts *dns.TSIG, tsigErr uint16) *dns.Msg {
	if tsigErr == 0 || ts == nil {
		return m
	}
	alg := dns.Fqdn(ts.Algorithm) // "" (empty rdata in the request) packs as "."
	m.Extra = append(m.Extra, &dns.TSIG{
		Hdr:        dns.RR_Header{Name: ts.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
		Algorithm:  alg,
		TimeSigned: uint64(time.Now().Unix()),
		Fudge:      Fudge,
		OrigId:     q.Id,
		Error:      tsigErr,
	})
	return m
}
