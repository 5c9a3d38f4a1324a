package secondary

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/pipeline"
)

// Timeouts of the requests to a primary.
const (
	// dialTimeout bounds a TCP connect.
	dialTimeout = 5 * time.Second
	// queryTimeout bounds a SOA query (each of UDP and TCP).
	queryTimeout = 5 * time.Second
	// readTimeout bounds the wait for each message of a transfer: a
	// primary that stalls mid-transfer fails it.
	readTimeout = 10 * time.Second
	// tsigFudge is the TSIG time window of requests (RFC 8945 suggests
	// 300 s).
	tsigFudge = 300
)

// xfrError is a failed request to a primary, with its result label.
type xfrError struct {
	result string // resultRefused, ...
	err    error
}

func (e *xfrError) Error() string { return e.err.Error() }
func (e *xfrError) Unwrap() error { return e.err }

// resultOf is the result label of err (resultError when it says none).
func resultOf(err error) string {
	var xe *xfrError
	if errors.As(err, &xe) {
		return xe.result
	}
	return resultError
}

func fail(result, format string, args ...any) error {
	return &xfrError{result: result, err: fmt.Errorf(format, args...)}
}

// netFail classifies a network error: a timeout, else an error.
func netFail(what string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return &xfrError{result: resultTimeout, err: fmt.Errorf("%s: timed out: %w", what, err)}
	}
	return &xfrError{result: resultError, err: fmt.Errorf("%s: %w", what, err)}
}

// rcodeFail is a primary's answer with a failing rcode.
func rcodeFail(what string, m *dns.Msg) error {
	res := resultError
	switch m.Rcode {
	case dns.RcodeRefused:
		res = resultRefused
	case dns.RcodeNotAuth:
		res = resultNotAuth
	}
	text := dns.RcodeToString[m.Rcode]
	if ts := m.IsTsig(); ts != nil && ts.Error != 0 {
		text += " " + dns.RcodeToString[int(ts.Error)]
	}
	return fail(res, "%s: the primary answered %s", what, text)
}

// client asks one zone's primaries.
type client struct {
	zone string
	key  *config.TSIG // nil: unsigned
	// wait bounds the wait for each message of a transfer (readTimeout).
	wait time.Duration
}

// request makes a question for the zone, signed when the client has a key.
func (c *client) request(qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(c.zone, qtype)
	m.RecursionDesired = false
	if c.key != nil {
		m.SetTsig(c.key.Name, c.key.Algorithm, tsigFudge, time.Now().Unix())
	}
	return m
}

// pack packs m, signing it when it carries a TSIG; mac is the request's
// MAC (what the answer's first message is verified with).
func (c *client) pack(m *dns.Msg) (out []byte, mac string, err error) {
	if c.key == nil {
		out, err = m.Pack()
		return out, "", err
	}
	return dns.TsigGenerate(m, c.key.Secret, "", false)
}

// verify checks the TSIG of a message of an answer (raw as it came, m
// unpacked) when the client signs: every message must be signed by the
// key (RFC 8945 §5.3.1: the first covers the request's MAC, later ones
// the previous message's MAC and the timers only). It returns the MAC
// the next message is verified with.
func (c *client) verify(what string, raw []byte, m *dns.Msg, mac string, later bool) (string, error) {
	if c.key == nil {
		return "", nil
	}
	ts := m.IsTsig()
	if ts == nil {
		if !later && m.Rcode != dns.RcodeSuccess {
			return "", rcodeFail(what, m) // a refusal comes unsigned
		}
		return "", fail(resultNotAuth, "%s: a message of the answer is not signed", what)
	}
	if !strings.EqualFold(ts.Hdr.Name, c.key.Name) {
		return "", fail(resultNotAuth, "%s: the answer is signed with key %s, not %s", what, ts.Hdr.Name, c.key.Name)
	}
	if ts.Error != dns.RcodeSuccess {
		return "", rcodeFail(what, m)
	}
	if err := dns.TsigVerify(raw, c.key.Secret, mac, later); err != nil {
		return "", fail(resultNotAuth, "%s: bad TSIG on the answer: %v", what, err)
	}
	return ts.MAC, nil
}

// serial asks primary for the zone's SOA serial: over UDP, then TCP when
// the answer is truncated.
func (c *client) serial(ctx context.Context, primary netip.AddrPort) (uint32, error) {
	what := "SOA query to " + primary.String()
	q := c.request(dns.TypeSOA)
	for _, proto := range []string{"udp", "tcp"} {
		m, err := c.exchange(ctx, proto, primary, q)
		if err != nil {
			return 0, netFail(what, err)
		}
		if m.Truncated {
			continue
		}
		if _, err := c.verify(what, m.raw, m.Msg, m.mac, false); err != nil {
			return 0, err
		}
		if m.Rcode != dns.RcodeSuccess {
			return 0, rcodeFail(what, m.Msg)
		}
		if !m.Authoritative {
			return 0, fail(resultError, "%s: the answer is not authoritative (the primary does not serve the zone)", what)
		}
		for _, rr := range m.Answer {
			if soa, ok := rr.(*dns.SOA); ok && strings.EqualFold(soa.Hdr.Name, c.zone) {
				return soa.Serial, nil
			}
		}
		return 0, fail(resultError, "%s: the answer holds no SOA of the zone", what)
	}
	return 0, fail(resultError, "%s: truncated over TCP", what)
}

// answer is a message read with its raw form and the request's MAC.
type answer struct {
	*dns.Msg
	raw []byte
	mac string
}

// exchange sends q to primary over proto and reads one answer to it.
func (c *client) exchange(ctx context.Context, proto string, primary netip.AddrPort, q *dns.Msg) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	out, mac, err := c.pack(q)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, proto, primary.String())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	co := &dns.Conn{Conn: conn, UDPSize: dns.MaxMsgSize}
	if _, err := co.Write(out); err != nil {
		return nil, err
	}
	buf := make([]byte, dns.MaxMsgSize)
	for {
		n, err := co.Read(buf)
		if err != nil {
			return nil, err
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf[:n]); err != nil {
			if proto == "tcp" {
				return nil, err
			}
			continue // not an answer: wait for one
		}
		if m.Id != q.Id || !m.Response {
			if proto == "tcp" {
				return nil, fmt.Errorf("an answer to another request (ID %d)", m.Id)
			}
			continue
		}
		return &answer{Msg: m, raw: append([]byte(nil), buf[:n]...), mac: mac}, nil
	}
}

// transfer asks primary for the zone by AXFR, or by IXFR from the copy's
// soa (non-nil) and returns every record of the answer in order. Only a
// whole answer is returned: one that ends early, stalls more than
// readTimeout between messages, is not signed on every message (with a
// key) or is malformed is an error.
func (c *client) transfer(ctx context.Context, primary netip.AddrPort, soa *dns.SOA) ([]dns.RR, error) {
	qtype, kind := dns.TypeAXFR, "AXFR"
	if soa != nil {
		qtype, kind = dns.TypeIXFR, "IXFR"
	}
	what := kind + " from " + primary.String()
	q := c.request(qtype)
	if soa != nil {
		s := *soa
		s.Hdr = dns.RR_Header{Name: c.zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET}
		q.Ns = []dns.RR{&s}
	}
	out, mac, err := c.pack(q)
	if err != nil {
		return nil, fail(resultError, "%s: %v", what, err)
	}
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", primary.String())
	if err != nil {
		return nil, netFail(what, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	co := &dns.Conn{Conn: conn}
	_ = conn.SetWriteDeadline(time.Now().Add(readTimeout))
	if _, err := co.Write(out); err != nil {
		return nil, netFail(what, err)
	}
	var (
		rrs    []dns.RR
		serial uint32
		soas   int // SOAs with the new serial seen
		ixfr   bool
		buf    = make([]byte, dns.MaxMsgSize)
	)
	for n := 0; ; n++ {
		_ = conn.SetReadDeadline(time.Now().Add(c.wait))
		size, err := co.Read(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fail(resultError, "%s: %w", what, ctx.Err())
			}
			if soa != nil && len(rrs) == 1 && !isTimeout(err) {
				return rrs, nil // a lone newer SOA, then the end: AXFR it
			}
			if n > 0 && !isTimeout(err) {
				return nil, fail(resultError, "%s: the answer ended after %d messages, before the closing SOA: %v", what, n, err)
			}
			return nil, netFail(what, err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf[:size]); err != nil {
			return nil, fail(resultError, "%s: message %d: %v", what, n+1, err)
		}
		if m.Id != q.Id {
			return nil, fail(resultError, "%s: message %d answers another request (ID %d)", what, n+1, m.Id)
		}
		if mac, err = c.verify(what, buf[:size], m, mac, n > 0); err != nil {
			return nil, err
		}
		if m.Rcode != dns.RcodeSuccess {
			return nil, rcodeFail(what, m)
		}
		for _, rr := range m.Answer {
			s, isSOA := rr.(*dns.SOA)
			if len(rrs) == 0 {
				if !isSOA || !strings.EqualFold(s.Hdr.Name, c.zone) {
					return nil, fail(resultError, "%s: the answer does not begin with the zone's SOA", what)
				}
				serial = s.Serial
			}
			if len(rrs) == 1 && isSOA && soa != nil && s.Serial != serial {
				ixfr = true // SOA, old SOA, ...: incremental
			}
			if isSOA && s.Serial == serial {
				soas++
			}
			rrs = append(rrs, rr)
		}
		switch {
		case len(rrs) == 0:
			return nil, fail(resultError, "%s: an empty answer", what)
		case len(rrs) == 1 && soa != nil && n == 0 && len(m.Answer) == 1 && !pipeline.SerialLess(soa.Serial, serial):
			return rrs, nil // IXFR: the copy is current
		case ixfr && soas == 3, !ixfr && soas == 2:
			return rrs, nil
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
