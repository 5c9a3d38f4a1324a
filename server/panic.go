package server

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// panicLogEvery is how often one call site's panic is logged with its
// stack; the others are counted (dnsd_panics_total) but not logged, so a
// query of death repeated by a client cannot flood the log.
const panicLogEvery = time.Minute

// panicLog remembers when each call site last logged a panic. Its map is
// bounded by the number of places in the program that can panic.
type panicLog struct {
	mu   sync.Mutex
	last map[uintptr]time.Time
}

// due reports whether a panic at pc should be logged now.
func (l *panicLog) due(pc uintptr, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[pc]; ok && now.Sub(t) < panicLogEvery {
		return false
	}
	if l.last == nil {
		l.last = make(map[uintptr]time.Time)
	}
	l.last[pc] = now
	return true
}

// panicSite returns the program counter and name of the function that
// panicked: the first frame below runtime.gopanic that is not in the
// runtime (runtime errors pass through sigpanic and panicmem first). It
// must be called from the deferred function that recovered.
func panicSite() (uintptr, string) {
	var pcs [64]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	seenPanic := false
	for {
		f, more := frames.Next()
		if !seenPanic {
			seenPanic = f.Function == "runtime.gopanic"
		} else if !strings.HasPrefix(f.Function, "runtime.") {
			return f.PC, fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line)
		}
		if !more {
			return 0, "unknown"
		}
	}
}

// recovered handles a panic recovered by serveRaw: it is logged at ERROR
// with its stack (at most once per panicLogEvery per call site), marked in
// the Observation, and the client gets SERVFAIL when its query had been
// parsed (q != nil), else nothing.
func (s *Server) recovered(sc *scratch, obs *Observation, r any, q *dns.Msg, qopt *dns.OPT, st *settings, maxSize int) (resp []byte) {
	obs.Panicked = true
	pc, site := panicSite()
	if s.panics.due(pc, time.Now()) {
		s.log.Error("panic while answering a query, answered SERVFAIL (logged at most once a minute per call site)",
			"panic", fmt.Sprint(r), "site", site, "proto", obs.Proto, "client", obs.Client,
			"name", obs.Name, "qtype", dns.Type(obs.Qtype).String(), "stack", string(debug.Stack()))
	}
	// sc's pack buffer, if the panic left one, is reused by finish or
	// given back by the caller's release, as after any query.
	if q == nil || st == nil {
		return nil
	}
	defer func() {
		// The SERVFAIL itself failed: send nothing.
		if recover() != nil {
			resp = nil
		}
	}()
	out := s.reply(sc, q, dns.RcodeServerFailure)
	out.Authoritative = false
	return s.finish(sc, obs, out, qopt, st, maxSize)
}
