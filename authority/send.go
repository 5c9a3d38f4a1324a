package authority

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Sending a transfer (AXFR RFC 5936, IXFR RFC 1995): one request answered
// by a stream of messages of at most TransferMsgSize bytes of records,
// each signed when the transfer is TSIG-signed (RFC 8945 §5.3.1: the
// first message covers the request's MAC, each later one the previous
// message's MAC and the timers only — what miekg/dns's Transfer client
// and other secondaries verify). Sending holds no pipeline generation:
// only the listing and the connection the server writes to.

// Sender bounds the zone transfers being sent (limits.max_transfers) and
// the CPU they take: at most packers of them pack a message at once (half
// the CPUs, at least one), so that transfers never take every CPU from
// queries. One Sender serves a server's every transfer.
type Sender struct {
	n       atomic.Int64  // transfers being sent
	packers chan struct{} // a token per message being packed
}

// NewSender returns a Sender with no transfer being sent.
func NewSender() *Sender {
	return &Sender{packers: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))}
}

// Take claims one of limit transfer slots (false: limit are being sent);
// Give returns it.
func (s *Sender) Take(limit int) bool {
	if s.n.Add(1) > int64(limit) {
		s.n.Add(-1)
		return false
	}
	return true
}

// Give returns a slot Take claimed.
func (s *Sender) Give() { s.n.Add(-1) }

// Send writes res.RRs, the answer to q, as a transfer's messages, one at
// a time: reply completes each response as the server completes every
// answer (its OPT record), write sends one message behind its two-byte
// length prefix (the buffer is reused for the next one). It stops at the
// first error, ctx's end included.
func (s *Sender) Send(ctx context.Context, q *dns.Msg, res *Result, reply func(*dns.Msg), write func([]byte) error) error {
	mac := res.RequestMAC
	rrs := res.RRs
	buf := make([]byte, 2+dns.MaxMsgSize) // this transfer's messages, one at a time
	for first := true; len(rrs) > 0; first = false {
		n, size := 0, 0
		for n < len(rrs) {
			l := dns.Len(rrs[n])
			if n > 0 && size+l > TransferMsgSize {
				break
			}
			size += l
			n++
		}
		m := new(dns.Msg)
		m.SetReply(q)
		m.Authoritative = true
		m.Compress = true
		m.Answer = rrs[:n:n] // the listing is shared: never appended to
		reply(m)
		rrs = rrs[n:]
		out, next, err := s.pack(ctx, m, buf, res.Key, mac, !first)
		if err != nil {
			return err
		}
		mac = next
		if err := write(out); err != nil {
			return err
		}
	}
	return nil
}

// pack waits for a packing token (an error: ctx ended) and packs m into
// buf behind a two-byte length prefix, signed with key when it is set.
func (s *Sender) pack(ctx context.Context, m *dns.Msg, buf []byte, key *TSIGKey, mac string, timersOnly bool) (out []byte, newMAC string, err error) {
	select {
	case s.packers <- struct{}{}:
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	defer func() { <-s.packers }()
	var wire []byte
	if key != nil {
		m.SetTsig(key.Name, key.Algorithm, Fudge, time.Now().Unix())
		wire, newMAC, err = dns.TsigGenerate(m, key.Secret, mac, timersOnly)
	} else {
		wire, err = m.PackBuffer(buf[2:])
	}
	if err != nil {
		return nil, "", fmt.Errorf("packing a transfer message: %w", err)
	}
	if len(wire) > dns.MaxMsgSize {
		return nil, "", fmt.Errorf("packing a transfer message: %d bytes", len(wire))
	}
	if &wire[0] != &buf[2] {
		if cap(buf) < 2+len(wire) {
			buf = make([]byte, 2+len(wire))
		}
		copy(buf[2:], wire)
	}
	out = buf[:2+len(wire)]
	binary.BigEndian.PutUint16(out, uint16(len(wire)))
	return out, newMAC, nil
}
