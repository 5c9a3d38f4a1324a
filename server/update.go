package server

import (
	"context"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/authority"
	"github.com/dnsd/dnsd/pipeline"
)

// updateWait bounds how long an UPDATE waits for the zone's update in
// progress and its commit: past it the client gets SERVFAIL (and
// retries).
const updateWait = 10 * time.Second

// update answers a dynamic update (RFC 2136) as the authority decides
// (authority.Updater): without one, or with no zone open to updates,
// UPDATE is not implemented (NOTIMP). A policy refusal carries Extended
// DNS Error 18 (Prohibited) naming the rule; finish signs the answer
// when the update was signed.
func (s *Server) update(ctx context.Context, sc *scratch, obs *Observation, q *dns.Msg, wire []byte, start time.Time) *dns.Msg {
	up, ok := s.set.gen().auth.(authority.Updater)
	if !ok || !up.Updates() {
		return s.reply(sc, q, dns.RcodeNotImplemented)
	}
	ctx, cancel := context.WithTimeout(ctx, updateWait)
	defer cancel()
	ans := up.Update(ctx, q, wire, obs.Client)
	obs.Zone = ans.Zone
	if s.observer != nil {
		s.observer.Update(ans.Zone, ans.Result, ans.Changed, time.Since(start))
	}
	out := s.reply(sc, q, ans.Rcode)
	if ans.Reason != "" {
		out.Extra = append(out.Extra, pipeline.EDE(dns.ExtendedErrorCodeProhibited, ans.Reason))
	}
	return sc.signedAs(out, q, ans.Check)
}
