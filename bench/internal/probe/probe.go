// Package probe measures a server's query latency while a benchmark loads
// it otherwise: a steady stream of UDP queries for one name, and the
// latency percentiles of their answers.
package probe

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/miekg/dns"
)

// Samples are the latencies of a probe's answers, sorted, and the
// queries it lost.
type Samples struct {
	D    []time.Duration
	Lost int
}

// Pct returns the p-th quantile (0..1) of the latencies, 0 without any.
func (s *Samples) Pct(p float64) time.Duration {
	if len(s.D) == 0 {
		return 0
	}
	return s.D[min(len(s.D)-1, int(float64(len(s.D))*p))]
}

// Max returns the largest latency, 0 without any.
func (s *Samples) Max() time.Duration {
	if len(s.D) == 0 {
		return 0
	}
	return s.D[len(s.D)-1]
}

// Percentiles says p50 and p99.
func (s *Samples) Percentiles() string {
	return fmt.Sprintf("p50=%s p99=%s", s.Pct(0.50).Round(10*time.Microsecond), s.Pct(0.99).Round(10*time.Microsecond))
}

// Run asks name (type A) at addr over UDP at qps until d has passed or
// ctx ends; an unanswered query (1 s) is lost and counts as 1 s.
func Run(ctx context.Context, addr, name string, qps int, d time.Duration) *Samples {
	s := &Samples{}
	c, err := net.Dial("udp", addr)
	if err != nil {
		s.Lost++
		return s
	}
	defer c.Close()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	buf := make([]byte, 512)
	t := time.NewTicker(time.Second / time.Duration(qps))
	defer t.Stop()
	end := time.Now().Add(d)
	for id := uint16(1); time.Now().Before(end) && ctx.Err() == nil; id++ {
		<-t.C
		m.Id = id
		wire, _ := m.Pack()
		start := time.Now()
		_ = c.SetDeadline(start.Add(time.Second))
		if _, err := c.Write(wire); err != nil {
			s.Lost++
			continue
		}
		for {
			n, err := c.Read(buf)
			if err != nil {
				s.Lost++
				s.D = append(s.D, time.Second)
				break
			}
			if n >= 2 && uint16(buf[0])<<8|uint16(buf[1]) == id {
				s.D = append(s.D, time.Since(start))
				break
			}
		}
	}
	slices.Sort(s.D)
	return s
}

// Wait waits until name (of type qtype) is answered at addr with at
// least one record, or limit has passed.
func Wait(addr, name string, qtype uint16, limit time.Duration) error {
	c := &dns.Client{Timeout: time.Second}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if r, _, err := c.Exchange(m, addr); err == nil && len(r.Answer) > 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not answered within %v", name, limit)
}
