//go:build linux

package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The fixed-rate mode is an open loop paced to the microsecond: one
// goroutine spins on the clock, and at each turn sends the queries due by
// now (one sendmmsg) and reads every answer already there (one recvmmsg
// that does not wait). At 80,000/s a query leaves every 12.5 µs, one at a
// time, as from many independent clients; answers are read as they come.
// It takes the generator's whole core, which bench/peers.sh gives it.
//
// It does not sleep between sends: Go's timers wake about a millisecond
// late, so the queries would leave in bursts and the percentiles would
// measure how fast a server drains a burst, not how long it takes to answer.
//
// An answer's latency ends when the kernel received it (SO_TIMESTAMPNS;
// on loopback that is the moment the server sent it), not when the loop
// got round to reading it; the latter is reported beside it (p99_read_us)
// and is the latency where the kernel gives no timestamp.

const pacedBatch = 64 // most queries one sendmmsg sends, most answers one recvmmsg reads

// paced is the state of one fixed-rate measurement.
type paced struct {
	qs     [][]byte
	rate   int
	warm   time.Duration // not measured: the first second
	end    time.Duration // warm + the measuring time
	start  int64         // wall clock, ns, as the kernel's stamps
	stamps bool          // the kernel stamps what the socket receives

	sentAt []int64 // by query ID: ns since start; 0: not awaited
	id     uint16
	sent   int64 // queries sent or skipped, since start
	// measured: queries sent after the warm-up; skipped: those the
	// generator skipped after a stall of its own (see skip); waiting:
	// measured queries not answered yet.
	measured, skipped, waiting int64
	got                        counts
	lat, read                  []time.Duration // of the measured answers: until the kernel's stamp, until read

	out   [pacedBatch][]byte
	sends [pacedBatch]unix.Mmsghdr
	siov  [pacedBatch]unix.Iovec
	in    [pacedBatch][4096]byte
	oob   [pacedBatch][64]byte
	recvs [pacedBatch]unix.Mmsghdr
	riov  [pacedBatch]unix.Iovec
}

// fixedRate sends rate queries per second on conn for 1 s of warm-up plus
// dur and reports the latency percentiles of the answers to the queries
// sent after the warm-up; a query unanswered a second after the last one
// was sent is lost. The query ID indexes the send time, so at most 65,536
// queries are told apart at once (over 3 s at 20,000/s, far above any
// answer's latency).
func fixedRate(conn *net.UDPConn, qs [][]byte, rate int, dur time.Duration, label string) string {
	rc, err := conn.SyscallConn()
	if err != nil {
		fatal(err)
	}
	n := int(float64(rate)*dur.Seconds()) + 16
	g := &paced{
		qs: qs, rate: rate, warm: time.Second, end: time.Second + dur,
		sentAt: make([]int64, 65536),
		lat:    make([]time.Duration, 0, n), read: make([]time.Duration, 0, n),
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		g.stamps = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) == nil
		lerr = g.loop(fd)
	}); err != nil {
		fatal(err)
	}
	if lerr != nil {
		fatal(lerr)
	}
	return g.report(label)
}

func (g *paced) since() time.Duration { return time.Duration(time.Now().UnixNano() - g.start) }

// loop runs the measurement on the socket fd (non-blocking): until end it
// sends what is due and reads what came; then it reads until every
// measured query is answered or a second has passed.
func (g *paced) loop(fd uintptr) error {
	for i := range g.sends {
		g.sends[i].Hdr.Iov = &g.siov[i]
		g.sends[i].Hdr.Iovlen = 1
		g.out[i] = make([]byte, 0, 512)
		g.riov[i].Base = &g.in[i][0]
		g.riov[i].SetLen(len(g.in[i]))
		g.recvs[i].Hdr.Iov = &g.riov[i]
		g.recvs[i].Hdr.Iovlen = 1
	}
	maxBacklog := max(int64(g.rate)/500, pacedBatch) // 2 ms of queries
	g.start = time.Now().UnixNano()
	for {
		now := g.since()
		if now >= g.end {
			if g.waiting == 0 || now >= g.end+time.Second {
				return nil
			}
		} else {
			due := int64(now.Seconds() * float64(g.rate))
			if n := skip(g.sent, due, maxBacklog); n > 0 {
				g.sent += n
				if now >= g.warm {
					g.skipped += n
				}
			}
			if g.sent < due {
				if err := g.send(fd, int(min(due-g.sent, pacedBatch)), now); err != nil {
					return err
				}
			}
		}
		if err := g.recv(fd); err != nil {
			return err
		}
	}
}

// send sends the next n queries, stamped now.
func (g *paced) send(fd uintptr, n int, now time.Duration) error {
	at := max(int64(now), 1) // 0 means "not awaited"
	for i := range n {
		g.id++
		b := append(g.out[i][:0], g.qs[(g.sent+int64(i))%int64(len(g.qs))]...)
		binary.BigEndian.PutUint16(b, g.id)
		g.out[i] = b
		g.siov[i].Base = &b[0]
		g.siov[i].SetLen(len(b))
		g.sentAt[g.id] = at
	}
	for done := 0; done < n; {
		r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&g.sends[done])), uintptr(n-done), 0, 0, 0)
		switch e {
		case 0:
			done += int(r)
		case unix.EINTR, unix.EAGAIN, unix.ENOBUFS:
		case unix.ECONNREFUSED:
			// An earlier query met a closed port (the server is not
			// there yet or any more); that query is lost, not this one.
		default:
			return fmt.Errorf("sendmmsg: %w", e)
		}
	}
	g.sent += int64(n)
	if now >= g.warm {
		g.measured += int64(n)
		g.waiting += int64(n)
	}
	return nil
}

// recv reads the answers already received, if any, without waiting.
func (g *paced) recv(fd uintptr) error {
	for {
		for i := range g.recvs {
			h := &g.recvs[i].Hdr
			if g.stamps {
				h.Control = &g.oob[i][0]
				h.SetControllen(len(g.oob[i]))
			}
			g.recvs[i].Len = 0
		}
		r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&g.recvs[0])), pacedBatch, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
		case unix.EAGAIN, unix.EINTR, unix.ECONNREFUSED:
			return nil
		default:
			return fmt.Errorf("recvmmsg: %w", e)
		}
		now := g.since()
		for i := range int(r) {
			m := &g.recvs[i]
			b := g.in[i][:m.Len]
			if len(b) < 12 {
				continue
			}
			id := binary.BigEndian.Uint16(b)
			t := time.Duration(g.sentAt[id])
			g.sentAt[id] = 0
			if t < g.warm {
				continue // a warm-up query, a duplicate or a stray
			}
			g.waiting--
			g.got[classify(b)].Add(1)
			at := now
			if ns, ok := rxStamp(g.oob[i][:m.Hdr.Controllen]); ok && ns-g.start <= int64(now) && ns-g.start >= int64(t) {
				at = time.Duration(ns - g.start)
			}
			g.lat = append(g.lat, at-t)
			g.read = append(g.read, now-t)
		}
		if int(r) < pacedBatch {
			return nil
		}
	}
}

// report is the result line. A query never answered counts as slower than
// every answer: a server that sheds load by dropping queries does not
// shorten its tail.
func (g *paced) report(label string) string {
	p := percentiles(g.lat, int(g.measured), 0.5, 0.99, 0.999)
	pr := percentiles(g.read, int(g.measured), 0.99)
	return fmt.Sprintf("%-16s rate=%d sent=%d skipped=%d %s lost=%d p50_us=%.1f p99_us=%.1f p999_us=%.1f p99_read_us=%.1f",
		label, g.rate, g.measured, g.skipped, &g.got, g.measured-int64(len(g.lat)), us(p[0]), us(p[1]), us(p[2]), us(pr[0]))
}

// rxStamp finds the receive time (ns since the Unix epoch) in a
// datagram's control messages, as SO_TIMESTAMPNS puts it there. The walk
// is the one the server's parsePktinfo makes.
func rxStamp(oob []byte) (int64, bool) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			return 0, false
		}
		data := oob[unix.CmsgLen(0):l]
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && len(data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(data))
			nsec := int64(binary.NativeEndian.Uint64(data[8:]))
			return sec*1e9 + nsec, true
		}
		oob = oob[min(unix.CmsgSpace(l-unix.CmsgLen(0)), len(oob)):]
	}
	return 0, false
}
