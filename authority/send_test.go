package authority

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// A listing larger than one message goes out in messages of at most
// TransferMsgSize bytes of records, in order, each signed: the first over
// the request's MAC, each later one over the previous message's MAC and
// the timers only (RFC 8945 §5.3.1).
func TestSendSplitsAndSigns(t *testing.T) {
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQ="
	key := &TSIGKey{Name: "k.", Algorithm: dns.HmacSHA256, Secret: secret}
	soa := dnstest.MustRR(t, "example. 60 IN SOA ns. mbox. 1 2 3 4 5")
	rrs := []dns.RR{soa}
	for i := range 5000 {
		rrs = append(rrs, dnstest.MustRR(t, fmt.Sprintf("host-%d.example. 60 IN TXT \"%060d\"", i, i)))
	}
	rrs = append(rrs, soa)
	q := new(dns.Msg)
	q.SetAxfr("example.")
	q.SetTsig(key.Name, key.Algorithm, Fudge, 0)
	_, reqMAC, err := dns.TsigGenerate(q, secret, "", false)
	if err != nil {
		t.Fatal(err)
	}
	var msgs [][]byte
	replied := 0
	s := NewSender()
	err = s.Send(context.Background(), q, &Result{RRs: rrs, Key: key, RequestMAC: reqMAC},
		func(*dns.Msg) { replied++ },
		func(b []byte) error {
			if n := int(binary.BigEndian.Uint16(b)); n != len(b)-2 {
				t.Errorf("length prefix %d, message %d bytes", n, len(b)-2)
			}
			msgs = append(msgs, append([]byte(nil), b[2:]...))
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) < 2 || replied != len(msgs) {
		t.Fatalf("%d messages, reply called %d times: want several, once each", len(msgs), replied)
	}
	mac, got := reqMAC, 0
	for i, b := range msgs {
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			t.Fatal(err)
		}
		if err := dns.TsigVerify(b, secret, mac, i > 0); err != nil { // rewrites b
			t.Fatalf("message %d: %v", i, err)
		}
		size := 0
		for _, rr := range m.Answer {
			if rr.String() != rrs[got].String() {
				t.Fatalf("record %d is %v, want %v", got, rr, rrs[got])
			}
			size += dns.Len(rr)
			got++
		}
		if size > TransferMsgSize {
			t.Errorf("message %d holds %d bytes of records, over %d", i, size, TransferMsgSize)
		}
		ts := m.IsTsig()
		if ts == nil {
			t.Fatalf("message %d is not signed: extra %v", i, m.Extra)
		}
		mac = ts.MAC
	}
	if got != len(rrs) {
		t.Errorf("%d records sent, want %d", got, len(rrs))
	}
}

// Take gives out limit slots at once; Give returns one.
func TestSenderLimit(t *testing.T) {
	s := NewSender()
	first := s.Take(2)
	if second := s.Take(2); !first || !second {
		t.Fatal("two slots of two refused")
	}
	if s.Take(2) {
		t.Error("a third slot of two given")
	}
	s.Give()
	if !s.Take(2) {
		t.Error("a slot given back was not taken again")
	}
}

// A send whose context has ended stops before packing anything.
func TestSendStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q := new(dns.Msg)
	q.SetAxfr("example.")
	s := NewSender()
	for range cap(s.packers) {
		s.packers <- struct{}{} // every token held: Send must wait, and ctx ends it
	}
	err := s.Send(ctx, q, &Result{RRs: []dns.RR{dnstest.MustRR(t, "example. 60 IN SOA ns. mbox. 1 2 3 4 5")}}, func(*dns.Msg) {}, func([]byte) error {
		t.Error("a message was written")
		return nil
	})
	if err == nil {
		t.Error("Send with an ended context and no packing token returned nil")
	}
}
