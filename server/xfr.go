package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/authority"
)

// Zone transfers (AXFR RFC 5936, IXFR RFC 1995) over TCP and TLS. The
// authority decides who may transfer what and lists the zone
// (authority.Transferer), and its Sender splits the listing into signed
// messages under limits.max_transfers; the server parses the request,
// writes the messages back to back on the connection and ends transfers
// at a stop. Over UDP, AXFR and IXFR are REFUSED by serveRaw.

// Transfer results (Observer.Transfer, dnsd_transfers_total).
const (
	TransferSuccess = "success"
	TransferRefused = "refused"
	TransferNotAuth = "notauth"
	TransferBusy    = "busy" // limits.max_transfers were being sent: SERVFAIL
	TransferError   = "error"
)

// transfers are the zone transfers being sent, ended at a stop.
type transfers struct {
	out  *authority.Sender
	stop context.Context    // done once Shutdown begins
	end  context.CancelFunc // ends stop
}

func (t *transfers) init() {
	t.out = authority.NewSender()
	t.stop, t.end = context.WithCancel(context.Background())
}

// isTransfer reports whether a raw message is a query (QR=0, opcode
// QUERY) with one question of type AXFR or IXFR. Anything odd is left to
// the normal path.
func isTransfer(msg []byte) bool {
	if len(msg) < 12 || msg[2]&0x80 != 0 || (msg[2]>>3)&0xF != dns.OpcodeQuery || binary.BigEndian.Uint16(msg[4:]) != 1 {
		return false
	}
	off := 12
	for off < len(msg) {
		l := int(msg[off])
		if l == 0 {
			off++
			if off+2 > len(msg) {
				return false
			}
			t := binary.BigEndian.Uint16(msg[off:])
			return t == dns.TypeAXFR || t == dns.TypeIXFR
		}
		if l&0xC0 != 0 {
			return false
		}
		off += 1 + l
	}
	return false
}

// serveTransfer answers one AXFR or IXFR request read from cc. Its
// messages are written back to back: cc's writer is held from the first
// to the last, so no other answer of the connection comes in between
// (the zone is listed before, without it). It reports whether the
// connection may go on (false: the request was unparseable or a write
// failed).
func (s *Server) serveTransfer(ctx context.Context, cc *tcpConn, wire []byte) (keep bool) {
	start := time.Now()
	client := cc.client
	obs := Observation{Proto: cc.proto.String(), Client: client, Rcode: -1}
	zone, result := "", ""
	locked := false
	defer func() {
		if r := recover(); r != nil {
			obs.Panicked, keep = true, false
			pc, site := panicSite()
			if s.panics.due(pc, time.Now()) {
				s.log.Error("panic while answering a zone transfer, connection closed (logged at most once a minute per call site)",
					"panic", fmt.Sprint(r), "site", site, "client", client, "name", obs.Name, "stack", string(debug.Stack()))
			}
		}
		if s.observer != nil {
			obs.Dropped = obs.Rcode < 0
			obs.Duration = time.Since(start)
			s.observer.Observe(obs)
			if !obs.Dropped {
				if result == "" {
					result = transferResult(obs.Rcode)
				}
				s.observer.Transfer(zone, result)
			}
		}
	}()
	defer func() { // runs before the recovery above
		if locked {
			cc.wmu.Unlock()
		}
	}()
	q := new(dns.Msg)
	if err := q.Unpack(wire); err != nil || len(q.Question) != 1 {
		obs.DropReason = DropMalformed
		return false
	}
	obs.Name = strings.ToLower(q.Question[0].Name)
	obs.Qtype = q.Question[0].Qtype
	st := s.set.Load()
	// A stop ends the transfer: its listing, its wait for a packing
	// token, and a write blocked on a client that does not read (the
	// connection is closed).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := context.AfterFunc(s.xfrs.stop, func() {
		cancel()
		cc.fail()
	})
	defer stopped()
	// sendWire writes one message with its length prefix.
	sendWire := func(buf []byte) error {
		if !locked {
			cc.wmu.Lock()
			locked = true
		}
		if err := cc.write(buf); err != nil {
			return fmt.Errorf("sending a transfer message: %w", err)
		}
		return nil
	}
	fail := func(rcode int, tsigErr uint16, key *authority.TSIGKey, mac string, ede ...dns.EDNS0) bool {
		m := new(dns.Msg)
		m.SetRcode(q, rcode)
		withOPT(m, q, st)
		if o := m.IsEdns0(); o != nil {
			o.Option = append(o.Option, ede...)
		}
		obs.Rcode = rcode
		if tsigErr == dns.RcodeBadTime && key != nil {
			out, err := authority.Sign(m, key, mac, tsigErr)
			if err == nil {
				err = sendWire(prefixed(out))
			}
			return err == nil
		}
		out, err := authority.WithError(m, q, q.IsTsig(), tsigErr).Pack()
		if err == nil {
			err = sendWire(prefixed(out))
		}
		return err == nil
	}
	if !st.acl.allowed(client, cc.u.loopback) || q.Question[0].Qclass != dns.ClassINET || s.auth == nil {
		return fail(dns.RcodeRefused, 0, nil, "")
	}
	res := s.auth.Transfer(ctx, &authority.Request{Msg: q, Wire: wire, Client: client})
	zone = res.Zone
	obs.Zone = res.Zone
	if res.Rcode != dns.RcodeSuccess {
		if res.Err != nil && s.xfrs.stop.Err() == nil {
			s.log.Warn("zone transfer failed", "zone", res.Zone, "client", client, "err", res.Err)
		}
		return fail(res.Rcode, res.TSIGError, res.Key, res.RequestMAC)
	}
	if !s.xfrs.out.Take(st.maxXfrs) {
		result = TransferBusy
		s.log.Debug("zone transfer refused: limits.max_transfers are being sent", "zone", res.Zone, "client", client, "max", st.maxXfrs)
		return fail(dns.RcodeServerFailure, 0, nil, "", &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeOther, ExtraText: "limits.max_transfers reached"})
	}
	defer s.xfrs.out.Give()
	obs.Rcode = dns.RcodeSuccess
	if err := s.xfrs.out.Send(ctx, q, &res, func(m *dns.Msg) { withOPT(m, q, st) }, sendWire); err != nil {
		obs.Rcode = dns.RcodeServerFailure
		if s.xfrs.stop.Err() != nil {
			s.log.Info("zone transfer ended by the stop", "zone", res.Zone, "client", client)
		} else {
			s.log.Debug("zone transfer aborted", "zone", res.Zone, "client", client, "err", err)
		}
		return false
	}
	return true
}

// prefixed is msg behind its two-byte length.
func prefixed(msg []byte) []byte {
	buf := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(buf, uint16(len(msg)))
	copy(buf[2:], msg)
	return buf
}

func transferResult(rcode int) string {
	switch rcode {
	case dns.RcodeSuccess:
		return TransferSuccess
	case dns.RcodeRefused:
		return TransferRefused
	case dns.RcodeNotAuth:
		return TransferNotAuth
	}
	return TransferError
}

// withOPT adds an OPT record to m, a response to q, when q has one
// (RFC 6891 section 6.1.1), as every other answer gets.
func withOPT(m, q *dns.Msg, st *settings) {
	if qo := q.IsEdns0(); qo != nil {
		m.SetEdns0(uint16(st.udpBuffer), qo.Do())
	}
}

// verifyQuery checks a signed query against the transfer key of its
// name (authority.Verify): NOTAUTH with BADKEY (unknown key), BADSIG or
// BADTIME, else success; sc is set to sign the answer (BADTIME's too).
func (s *Server) verifyQuery(sc *scratch, ts *dns.TSIG, wire []byte) (rcode int, tsigErr uint16) {
	var key *authority.TSIGKey
	if s.auth != nil {
		key = s.auth.TSIGKey(ts.Hdr.Name)
	}
	c := authority.Verify(key, ts, wire)
	sc.sign, sc.signMAC, sc.signErr = c.Key, c.MAC, 0
	if c.Error == dns.RcodeBadTime {
		sc.signErr = c.Error
	}
	return c.Rcode, c.Error
}

// signed packs out signed with sc's key (a TSIG record after the other
// additional records).
func (s *Server) signed(sc *scratch, out *dns.Msg) ([]byte, error) {
	return authority.Sign(out, sc.sign, sc.signMAC, sc.signErr)
}
