package server

import (
	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/authority"
)

// notifyIn answers a NOTIFY (RFC 1996) sent to dnsd as a secondary, as
// the authority decides (authority.NotifyReceiver): without one, NOTIFY
// is not implemented (NOTIMP, dnsd keeps no copy of any zone). An accepted NOTIFY
// is answered with its ID, QR and AA set; finish signs the answer when
// the NOTIFY was signed.
func (s *Server) notifyIn(sc *scratch, obs *Observation, q *dns.Msg, wire []byte) *dns.Msg {
	if len(q.Question) != 1 || q.Question[0].Qtype != dns.TypeSOA {
		return s.reply(sc, q, dns.RcodeFormatError)
	}
	nr, ok := s.set.gen().auth.(authority.NotifyReceiver) // the generation in place
	if !ok {
		return s.reply(sc, q, dns.RcodeNotImplemented)
	}
	ans := nr.NotifyIn(q, wire, obs.Client)
	if ans.Zone != "" {
		obs.Zone = ans.Zone
	}
	out := s.reply(sc, q, ans.Rcode)
	out.Authoritative = ans.Rcode == dns.RcodeSuccess
	return sc.signedAs(out, q, ans.Check)
}

// signedAs makes out, the answer to q, signed as the verdict c on q's
// signature says: with c's key (BADTIME included: finish signs it), or
// unsigned with c's TSIG error, or as it is when q was not checked.
func (sc *scratch) signedAs(out, q *dns.Msg, c authority.Check) *dns.Msg {
	switch {
	case c.Key != nil:
		sc.sign, sc.signMAC = c.Key, c.MAC
		if c.Error == dns.RcodeBadTime {
			sc.signErr = c.Error
		}
	case c.Error != 0:
		out = authority.WithError(out, q, q.IsTsig(), c.Error)
	}
	return out
}
