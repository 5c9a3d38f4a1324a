package authority

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// NOTIFY in (RFC 1996): a primary tells dnsd that a zone dnsd keeps a
// copy of has changed. The zone's source says who may say so
// (pipeline.NotifyTaker) and refreshes its copy; NotifyIn decides the answer.

// NotifyReceiver answers NOTIFYs: *Zones implements it, and so does the
// daemon's current generation.
type NotifyReceiver interface {
	NotifyIn(q *dns.Msg, wire []byte, from netip.Addr) NotifyAnswer
}

var _ NotifyReceiver = (*Zones)(nil)

// NotifyAnswer is the answer to a NOTIFY.
type NotifyAnswer struct {
	Rcode int // the answer's rcode; 0: NOERROR, the NOTIFY was taken
	// Zone is the zone when dnsd keeps a copy of it, else "".
	Zone string
	// Check is the TSIG verdict of a signed NOTIFY that was checked: the
	// answer is signed with Check.Key (BADTIME included), or carries
	// Check.Error unsigned (see WithError). Zero: the NOTIFY was not
	// signed, or was refused before its signature was checked.
	Check Check
}

// NotifyIn decides the answer to q, a NOTIFY (one SOA question) received
// as wire from address from. When no zone of the generation is a copy of
// a primary's, NOTIFY is not implemented: NOTIMP, as for any opcode dnsd
// does not serve. A zone dnsd keeps no copy of: NOTAUTH. A
// sender that is not one of the zone's primaries, or an unsigned NOTIFY
// where the zone has a key: REFUSED. A wrong key or signature: NOTAUTH
// with BADKEY or BADSIG (BADTIME, signed, for a good signature at a bad
// time). Otherwise the zone's source is told (it refreshes at once) and
// the answer is NOERROR, signed when the NOTIFY was.
func (a *Zones) NotifyIn(q *dns.Msg, wire []byte, from netip.Addr) NotifyAnswer {
	if !a.secondary {
		return NotifyAnswer{Rcode: dns.RcodeNotImplemented}
	}
	zone := strings.ToLower(dns.Fqdn(q.Question[0].Name))
	src := a.p.ZoneSource(zone, func(s pipeline.Source) bool { _, ok := s.(pipeline.NotifyTaker); return ok })
	if src == nil {
		return NotifyAnswer{Rcode: dns.RcodeNotAuth}
	}
	taker := src.(pipeline.NotifyTaker)
	ans := NotifyAnswer{Zone: zone}
	key, primary := taker.NotifyFrom(zone, from)
	if !primary {
		ans.Rcode = dns.RcodeRefused
		return ans
	}
	switch ts := q.IsTsig(); {
	case ts == nil && key != nil:
		ans.Rcode = dns.RcodeRefused
		return ans
	case ts != nil:
		if ans.Check = Verify(key, ts, wire); ans.Check.Rcode != dns.RcodeSuccess {
			ans.Rcode = ans.Check.Rcode
			return ans
		}
	}
	taker.Notify(zone)
	ans.Rcode = dns.RcodeSuccess
	return ans
}
