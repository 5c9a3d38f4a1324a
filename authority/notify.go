package authority

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/pipeline"
)

// NOTIFY (RFC 1996): secondaries of a transferred zone are told when its
// serial rises, so they transfer it at once instead of at their next
// refresh. Serials are watched by polling: every notifyCheck the current
// generation's zone serials are compared with the last ones seen (a few
// atomic loads per zone), which follows reloads without any hook into the
// sources. A zone is notified at start (its serial is new to the
// secondaries' primary), then at most once per notifyGap: changes in
// between are coalesced into one NOTIFY with the latest serial. Each
// target gets up to notifyTries attempts over UDP, notifyTimeout apart,
// until it answers; messages are TSIG-signed with the zone's key.

const (
	notifyCheck   = time.Second
	notifyGap     = 5 * time.Second
	notifyTries   = 3
	notifyTimeout = 2 * time.Second
)

// NOTIFY results (NotifyCounter, dnsd_notify_total).
const (
	NotifySent   = "sent"
	NotifyAcked  = "acked"
	NotifyFailed = "failed"
)

// NotifyCounter counts NOTIFY events by zone and result (the daemon's
// metrics).
type NotifyCounter interface {
	Notify(zone, result string)
}

// Notifier watches the serials of the transferred zones and sends
// NOTIFYs. It runs from Start until Close.
type Notifier struct {
	current func() *Zones
	m       NotifyCounter
	log     *slog.Logger

	check, gap, timeout time.Duration
	tries               int

	cancel context.CancelFunc
	wg     sync.WaitGroup // the watch loop and every send

	// Loop only.
	zones map[string]*zoneState
}

type zoneState struct {
	serial  uint32
	seen    bool      // serial is valid
	pending bool      // the serial rose since the last NOTIFY
	last    time.Time // when the last NOTIFY round started
	busy    chan struct{}
}

// NewNotifier returns a Notifier of the zones current returns (the
// current generation's, read at every check), counting into m.
func NewNotifier(current func() *Zones, m NotifyCounter, log *slog.Logger) *Notifier {
	return &Notifier{current: current, m: m, log: log, check: notifyCheck, gap: notifyGap, timeout: notifyTimeout, tries: notifyTries, zones: map[string]*zoneState{}}
}

// Start runs the watch loop.
func (s *Notifier) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.check)
		defer t.Stop()
		for {
			s.tick(ctx, time.Now())
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Close stops the loop and waits for NOTIFYs in flight (their exchanges
// end with the context).
func (s *Notifier) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

// tick compares the zones' serials with the last seen and starts the
// NOTIFY rounds that are due.
func (s *Notifier) tick(ctx context.Context, now time.Time) {
	a := s.current()
	p := a.Pipeline()
	live := map[string]bool{}
	for _, spec := range a.Transfers() {
		if len(spec.Notify) == 0 {
			continue
		}
		for _, zone := range spec.Zones {
			soa := p.ZoneSOA(zone)
			if soa == nil {
				continue
			}
			live[zone] = true
			if !p.ZoneSynced(zone) {
				continue // a secondary's transfer would fail: wait
			}
			st := s.zones[zone]
			if st == nil {
				st = &zoneState{}
				s.zones[zone] = st
			}
			if !st.seen || pipeline.SerialLess(st.serial, soa.Serial) {
				st.serial, st.seen, st.pending = soa.Serial, true, true
			}
			if !st.pending || now.Sub(st.last) < s.gap {
				continue
			}
			if st.busy != nil {
				select {
				case <-st.busy:
				default:
					continue // the last round is still retrying
				}
			}
			st.pending, st.last = false, now
			st.busy = make(chan struct{})
			s.wg.Add(1)
			go func(zone string, soa *dns.SOA, spec TransferSpec, done chan struct{}) {
				defer s.wg.Done()
				defer close(done)
				s.round(ctx, zone, soa, spec)
			}(zone, soa, spec, st.busy)
		}
	}
	for zone := range s.zones {
		if !live[zone] {
			delete(s.zones, zone)
		}
	}
}

// round notifies every target of spec's zone, in parallel, and waits.
func (s *Notifier) round(ctx context.Context, zone string, soa *dns.SOA, spec TransferSpec) {
	var wg sync.WaitGroup
	for _, addr := range spec.Notify {
		wg.Go(func() { s.notify(ctx, zone, soa, spec.Key, notifySource(spec.NotifyFrom, addr), addr) })
	}
	wg.Wait()
}

// notifySource returns the first of from of addr's address family
// (invalid when there is none: the system chooses).
func notifySource(from []netip.Addr, addr string) netip.Addr {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.Addr{}
	}
	for _, a := range from {
		if a.Is4() == ap.Addr().Unmap().Is4() {
			return a
		}
	}
	return netip.Addr{}
}

// notify sends one NOTIFY to addr from src (when valid), retrying until
// it answers.
func (s *Notifier) notify(ctx context.Context, zone string, soa *dns.SOA, key *TSIGKey, src netip.Addr, addr string) {
	c := &dns.Client{Net: "udp", Timeout: s.timeout}
	if src.IsValid() {
		c.Dialer = &net.Dialer{Timeout: s.timeout, LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
	}
	if key != nil {
		c.TsigSecret = map[string]string{key.Name: key.Secret}
	}
	var err error
	for try := 1; try <= s.tries; try++ {
		start := time.Now()
		if try > 1 {
			// A retry carries the zone's SOA as it is now.
			if now := s.current().Pipeline().ZoneSOA(zone); now != nil {
				soa = now
			}
		}
		m := new(dns.Msg)
		m.SetNotify(zone)
		m.Answer = []dns.RR{soa}
		if key != nil {
			m.SetTsig(key.Name, key.Algorithm, Fudge, time.Now().Unix())
		}
		s.m.Notify(zone, NotifySent)
		var r *dns.Msg
		r, _, err = c.ExchangeContext(ctx, m, addr)
		if ctx.Err() != nil {
			return
		}
		if r != nil && r.Rcode != dns.RcodeSuccess && (err == nil || errors.Is(err, dns.ErrAuth)) {
			// An error answer. To a signed NOTIFY it comes unsigned, or
			// with a TSIG that has no MAC (BADKEY, BADSIG: RFC 8945
			// §5.3.2), which miekg/dns reports as a failed verification:
			// the secondary's no either way, not worth a retry.
			s.m.Notify(zone, NotifyFailed)
			s.log.Warn("secondary refused our NOTIFY", "zone", zone, "serial", soa.Serial, "target", addr, "rcode", dns.RcodeToString[r.Rcode])
			return
		}
		if err == nil && key != nil && r.IsTsig() == nil {
			// miekg/dns verifies a signed reply, but takes an unsigned
			// one as it is: anyone could have sent it.
			err = errors.New("the reply to a signed NOTIFY is not signed")
		}
		if err == nil && r.Rcode == dns.RcodeSuccess {
			s.m.Notify(zone, NotifyAcked)
			s.log.Debug("secondary notified", "zone", zone, "serial", soa.Serial, "target", addr)
			return
		}
		if try < s.tries {
			// Attempts start s.timeout apart (a timeout has waited already).
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(s.timeout))):
			}
		}
	}
	s.m.Notify(zone, NotifyFailed)
	s.log.Warn("secondary did not answer our NOTIFY", "zone", zone, "serial", soa.Serial, "target", addr, "tries", s.tries, "err", err)
}
