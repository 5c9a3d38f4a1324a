package forward

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsd/dnsd/internal/rcode"
)

// upstream is one upstream of a pool with its health and idle connections.
type upstream struct {
	Upstream
	pool  *Pool
	label string
	tls   *tls.Config // tls and https upstreams only
	doh   *dohClient  // https upstreams only

	fails   atomic.Int32 // consecutive failures
	down    atomic.Bool  // fails reached max_fails; only a health probe brings it back
	looping atomic.Bool  // a loop probe came back: never used again
	probing atomic.Bool  // a health-check goroutine is running

	mu   sync.Mutex
	idle []idleConn // TCP/TLS connections ready for reuse, oldest first

	requests *prometheus.CounterVec // curried with upstream
	latency  prometheus.Observer
}

type idleConn struct {
	c     net.Conn
	since time.Time
}

func (u *upstream) usable() bool { return !u.down.Load() && !u.looping.Load() }

// exchange is one attempt of a query (attempt), with health accounting: a
// response of any rcode is a success, no response a failure.
func (u *upstream) exchange(ctx context.Context, wire []byte, k Key) (*dns.Msg, error) {
	m, err := u.attempt(ctx, wire, k)
	if err != nil {
		if u.pool.ctx.Err() == nil && ctx.Err() == nil {
			u.failed(err)
		}
		return nil, err
	}
	u.succeeded()
	return m, nil
}

// attempt sends the packed query wire (for k) once, with a fresh random ID,
// and waits up to the pool's timeout for the matching response. A UDP
// response with TC=1 is retried over TCP, with a timeout of its own.
func (u *upstream) attempt(ctx context.Context, wire []byte, k Key) (*dns.Msg, error) {
	timeout := u.pool.opts.Timeout
	start := time.Now()
	var m *dns.Msg
	var err error
	switch u.Proto {
	case "udp":
		m, err = u.exchangeUDP(ctx, wire, k, deadline(ctx, start, timeout))
		if err == nil && m.Truncated {
			u.observe(start, m, nil)
			start = time.Now()
			m, err = u.exchangeStream(ctx, wire, k, deadline(ctx, start, timeout))
		}
	case "https":
		m, err = u.doh.exchange(ctx, wire, k, deadline(ctx, start, timeout))
	default:
		m, err = u.exchangeStream(ctx, wire, k, deadline(ctx, start, timeout))
	}
	u.observe(start, m, err)
	return m, err
}

func deadline(ctx context.Context, start time.Time, timeout time.Duration) time.Time {
	d := start.Add(timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return d
}

func (u *upstream) observe(start time.Time, m *dns.Msg, err error) {
	label := "error"
	switch {
	case err == nil:
		label = rcode.Label(m.Rcode)
		u.latency.Observe(time.Since(start).Seconds())
	case isTimeout(err):
		label = "timeout"
	}
	u.requests.WithLabelValues(label).Inc()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// setID gives the query a fresh random ID and returns it.
func setID(wire []byte) uint16 {
	id := uint16(rand.Uint32())
	binary.BigEndian.PutUint16(wire, id)
	return id
}

// match parses b if it is the response to the query with this ID and k's
// question; nil otherwise (a late answer to an earlier query, a spoofing
// attempt, garbage).
func match(b []byte, id uint16, k Key) *dns.Msg {
	if len(b) < 12 || binary.BigEndian.Uint16(b) != id || b[2]&0x80 == 0 {
		return nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		return nil
	}
	if len(m.Question) != 1 {
		return nil
	}
	q := m.Question[0]
	if q.Qtype != k.Type || q.Qclass != dns.ClassINET || !strings.EqualFold(q.Name, k.Name) {
		return nil
	}
	return m
}

var udpBufs = sync.Pool{New: func() any { b := make([]byte, dns.MaxMsgSize); return &b }}

// exchangeUDP sends wire from a new socket (a fresh random source port)
// and reads until the matching response arrives or the deadline passes.
func (u *upstream) exchangeUDP(ctx context.Context, wire []byte, k Key, dl time.Time) (*dns.Msg, error) {
	d := net.Dialer{Deadline: dl}
	c, err := d.DialContext(ctx, "udp", u.Addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(dl)
	defer context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })()
	id := setID(wire)
	if _, err := c.Write(wire); err != nil {
		return nil, err
	}
	bp := udpBufs.Get().(*[]byte)
	defer udpBufs.Put(bp)
	for {
		n, err := c.Read(*bp)
		if err != nil {
			return nil, err
		}
		if m := match((*bp)[:n], id, k); m != nil {
			return m, nil
		}
	}
}

// exchangeStream sends wire over TCP or TLS, reusing an idle connection
// when one is fresh enough. A reused connection that fails other than by
// timing out (the server closed it) is dropped and the query retried on
// the next one, or a new one.
func (u *upstream) exchangeStream(ctx context.Context, wire []byte, k Key, dl time.Time) (*dns.Msg, error) {
	for {
		c, reused := u.takeIdle()
		if c == nil {
			var err error
			if c, err = u.dial(ctx, dl); err != nil {
				return nil, err
			}
		}
		stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
		m, err := roundTrip(c, wire, k, dl)
		if !stop() && err == nil { // ctx ended: the deadline may be set
			err = ctx.Err()
		}
		if err == nil {
			u.putIdle(c)
			return m, nil
		}
		_ = c.Close()
		if !reused || isTimeout(err) || ctx.Err() != nil || time.Now().After(dl) {
			return nil, err
		}
	}
}

func (u *upstream) dial(ctx context.Context, dl time.Time) (net.Conn, error) {
	nd := &net.Dialer{Deadline: dl}
	if u.tls == nil {
		return nd.DialContext(ctx, "tcp", u.Addr)
	}
	td := &tls.Dialer{NetDialer: nd, Config: u.tls}
	return td.DialContext(ctx, "tcp", u.Addr)
}

// roundTrip writes one length-prefixed query and reads its response.
func roundTrip(c net.Conn, wire []byte, k Key, dl time.Time) (*dns.Msg, error) {
	_ = c.SetDeadline(dl)
	id := setID(wire)
	out := make([]byte, 2+len(wire))
	binary.BigEndian.PutUint16(out, uint16(len(wire)))
	copy(out[2:], wire)
	if _, err := c.Write(out); err != nil {
		return nil, err
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, err
	}
	m := match(b, id, k)
	if m == nil {
		return nil, errMalformed // out of step: the connection is closed
	}
	return m, nil
}

// takeIdle returns the newest idle connection that has not expired.
func (u *upstream) takeIdle() (net.Conn, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for len(u.idle) > 0 {
		ic := u.idle[len(u.idle)-1]
		u.idle = u.idle[:len(u.idle)-1]
		if time.Since(ic.since) < idleExpiry {
			return ic.c, true
		}
		_ = ic.c.Close()
	}
	return nil, false
}

func (u *upstream) putIdle(c net.Conn) {
	u.mu.Lock()
	if u.pool.ctx.Err() == nil && len(u.idle) < maxIdle {
		u.idle = append(u.idle, idleConn{c: c, since: time.Now()})
		c = nil
	}
	u.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// closeIdle closes the expired idle connections, or all of them.
func (u *upstream) closeIdle(all bool) {
	u.mu.Lock()
	keep := u.idle[:0]
	var stale []net.Conn
	for _, ic := range u.idle {
		if all || time.Since(ic.since) >= idleExpiry {
			stale = append(stale, ic.c)
		} else {
			keep = append(keep, ic)
		}
	}
	clear(u.idle[len(keep):])
	u.idle = keep
	u.mu.Unlock()
	for _, c := range stale {
		_ = c.Close()
	}
	if all && u.doh != nil {
		u.doh.transport.CloseIdleConnections()
	}
}

// idleCount reports the idle connections held (tests).
func (u *upstream) idleCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.idle)
}

// Health. A failure (timeout, network error, garbage) counts; max_fails
// consecutive ones mark the upstream down. After any failure a probe
// (". IN NS", any response is healthy) runs every health_check until one
// succeeds, which marks the upstream up again.

func (u *upstream) succeeded() {
	if u.fails.Load() != 0 {
		u.fails.Store(0)
	}
	if u.down.Load() && u.down.CompareAndSwap(true, false) {
		u.pool.recoveries.Add(1)
		u.pool.log.Warn("forward upstream is up again", "upstream", u.label)
	}
}

// failed counts a failed query and starts the health probes.
func (u *upstream) failed(err error) {
	u.countFailure(err)
	if u.probing.CompareAndSwap(false, true) && !u.pool.spawn(u.probeLoop) {
		u.probing.Store(false)
	}
}

// countFailure counts one failure, marking the upstream down at max_fails.
func (u *upstream) countFailure(err error) {
	n := u.fails.Add(1)
	if int(n) >= u.pool.opts.MaxFails && u.down.CompareAndSwap(false, true) {
		u.pool.log.Warn("forward upstream is down", "upstream", u.label, "consecutive_failures", n, "err", err)
	}
}

var healthQuery = Key{Name: ".", Type: dns.TypeNS}

func (u *upstream) probeLoop() {
	wire, _ := packQuery(healthQuery, u.pool.opts.UDPSize) // ". NS" always packs
	t := time.NewTicker(u.pool.opts.HealthCheck)
	defer t.Stop()
	for {
		select {
		case <-u.pool.ctx.Done():
			u.probing.Store(false)
			return
		case <-t.C:
		}
		if u.fails.Load() != 0 || u.down.Load() { // else a query succeeded meanwhile
			if _, err := u.attempt(u.pool.ctx, wire, healthQuery); err != nil {
				if u.pool.ctx.Err() == nil {
					u.countFailure(err)
				}
				continue
			}
			u.succeeded()
		}
		u.probing.Store(false)
		// A failure between the check and the store found probing set
		// and started nothing: keep probing for it.
		if u.fails.Load() == 0 || !u.probing.CompareAndSwap(false, true) {
			return
		}
	}
}

// markLoop is called when this upstream's loop probe came back to dnsd.
func (u *upstream) markLoop(name string) {
	if u.looping.CompareAndSwap(false, true) {
		u.pool.met.loops.Inc()
		u.pool.log.Error("forwarding loop detected: this upstream sends queries back to dnsd; it is no longer used (fix its configuration or dnsd's, then reload)",
			"upstream", u.label, "probe", name)
	}
}
