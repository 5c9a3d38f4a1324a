package secondary

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// testPrimary is an in-process primary (a real miekg/dns server on
// 127.0.0.1, UDP and TCP) serving one zone in versions: SOA, AXFR and
// IXFR (incremental from any version it holds), optionally TSIG-signed,
// with faults to turn on.
type testPrimary struct {
	t    *testing.T
	zone string
	addr netip.AddrPort
	udp  *dns.Server
	tcp  *dns.Server

	mu       sync.Mutex
	serial   uint32
	expire   uint32 // SOA expire, seconds
	versions map[uint32][]string
	// faults
	refuseIXFR bool // IXFR: REFUSED
	axfrIXFR   bool // IXFR: answered AXFR-form
	stall      bool // AXFR/IXFR: stop after the first message, keep the connection
	badSecond  bool // the second message of a transfer is signed with another secret
	truncate   bool // the connection is closed after the first message
	perMsg     int  // records per transfer message (default 2)
	asked      map[uint16]int
	stop       chan struct{}
}

const (
	testKey    = "xfr-key."
	testSecret = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"
	testZone   = "partner.example."
)

func newPrimary(t *testing.T, tsig bool) *testPrimary {
	t.Helper()
	p := &testPrimary{t: t, zone: testZone, expire: 3600, versions: map[uint32][]string{}, asked: map[uint16]int{}, stop: make(chan struct{}), perMsg: 2}
	var (
		pc  net.PacketConn
		l   net.Listener
		err error
	)
	for range 20 { // one port for both: retry when TCP's is taken
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	p.addr = netip.MustParseAddrPort(pc.LocalAddr().String())
	var secrets map[string]string
	if tsig {
		secrets = map[string]string{testKey: testSecret}
	}
	p.udp = &dns.Server{PacketConn: pc, Handler: p, TsigSecret: secrets}
	p.tcp = &dns.Server{Listener: l, Handler: p, TsigSecret: secrets}
	var started sync.WaitGroup
	started.Add(2)
	p.udp.NotifyStartedFunc, p.tcp.NotifyStartedFunc = started.Done, started.Done
	go func() { _ = p.udp.ActivateAndServe() }()
	go func() { _ = p.tcp.ActivateAndServe() }()
	started.Wait()
	t.Cleanup(p.close)
	return p
}

var closeOnce sync.Map

func (p *testPrimary) close() {
	if _, done := closeOnce.LoadOrStore(p, true); done {
		return
	}
	close(p.stop)
	_ = p.udp.Shutdown()
	_ = p.tcp.Shutdown()
}

// set makes serial the current version, with records (zone-file lines
// relative to the zone).
func (p *testPrimary) set(serial uint32, records ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serial = serial
	p.versions[serial] = records
}

func (p *testPrimary) with(f func(p *testPrimary)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func (p *testPrimary) count(t uint16) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked[t]
}

func (p *testPrimary) soa(serial uint32) dns.RR {
	return mustRR(p.t, p.zone+" 3600 IN SOA ns1."+p.zone+" admin."+p.zone+" "+itoa(serial)+" 1 1 "+itoa(p.expire)+" 60")
}

func (p *testPrimary) rrs(serial uint32) []dns.RR {
	var out []dns.RR
	for _, s := range p.versions[serial] {
		rr, err := dns.NewRR("$ORIGIN " + p.zone + "\n" + s)
		if err != nil {
			p.t.Errorf("record %q: %v", s, err)
			continue
		}
		out = append(out, rr)
	}
	return out
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func mustRR(t *testing.T, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

func (p *testPrimary) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := r.Question[0]
	p.asked[q.Qtype]++
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	signed := r.IsTsig() != nil
	if signed && w.TsigStatus() != nil {
		m.Rcode = dns.RcodeNotAuth
		_ = w.WriteMsg(m)
		return
	}
	sign := func(m *dns.Msg) {
		if signed {
			m.SetTsig(testKey, dns.HmacSHA256, 300, time.Now().Unix())
		}
	}
	switch q.Qtype {
	case dns.TypeSOA:
		m.Answer = []dns.RR{p.soa(p.serial)}
		sign(m)
		_ = w.WriteMsg(m)
		return
	case dns.TypeAXFR, dns.TypeIXFR:
	default:
		m.Rcode = dns.RcodeRefused
		_ = w.WriteMsg(m)
		return
	}
	if q.Qtype == dns.TypeIXFR && p.refuseIXFR {
		m.Rcode = dns.RcodeRefused
		sign(m)
		_ = w.WriteMsg(m)
		return
	}
	cur := p.soa(p.serial)
	all := append([]dns.RR{cur}, p.rrs(p.serial)...)
	all = append(all, cur)
	if q.Qtype == dns.TypeIXFR && !p.axfrIXFR && len(r.Ns) == 1 {
		from := r.Ns[0].(*dns.SOA).Serial
		if _, ok := p.versions[from]; ok && from != p.serial {
			del, add := diff(p.rrs(from), p.rrs(p.serial))
			all = []dns.RR{cur, p.soa(from)}
			all = append(all, del...)
			all = append(all, cur)
			all = append(all, add...)
			all = append(all, cur)
		} else if from == p.serial {
			all = []dns.RR{cur}
		}
	}
	for i, n := 0, 0; i < len(all); i, n = i+p.perMsg, n+1 {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		m.Answer = all[i:min(i+p.perMsg, len(all))]
		sign(m)
		switch {
		case n == 1 && p.stall:
			p.mu.Unlock()
			<-p.stop
			p.mu.Lock()
			return
		case n == 1 && p.truncate:
			_ = w.Close()
			return
		case n == 1 && p.badSecond && signed:
			out, _, err := dns.TsigGenerate(m, "b3RoZXJzZWNyZXRvdGhlcnNlY3JldA==", "", true)
			if err != nil {
				p.t.Error(err)
			}
			_, _ = w.Write(out)
		default:
			if err := w.WriteMsg(m); err != nil {
				return
			}
		}
		w.TsigTimersOnly(true)
	}
}

// diff returns the records of a not in b, and of b not in a.
func diff(a, b []dns.RR) (del, add []dns.RR) {
	in := func(rr dns.RR, l []dns.RR) bool {
		for _, x := range l {
			if dns.IsDuplicate(rr, x) {
				return true
			}
		}
		return false
	}
	for _, rr := range a {
		if !in(rr, b) {
			del = append(del, rr)
		}
	}
	for _, rr := range b {
		if !in(rr, a) {
			add = append(add, rr)
		}
	}
	return del, add
}
