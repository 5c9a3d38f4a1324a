package server

import (
	"sync"
	"sync/atomic"
	"time"
)

// watchEvery is how often the watchdog looks at the readers: a TCP or TLS
// reader that has been answering one query itself for between one and
// two of these is relieved (see tcpConn), a UDP reader's batch taken over
// (see udpReader). Local answers and cache hits take microseconds; a
// source that waits for an upstream says so (pipeline.Waiting) and is
// relieved at once, so the watchdog only finds what nothing announced (an
// answer long in the making, a source that waits unannounced). Its ticks,
// while readers answer, are wake-ups of an otherwise idle process at
// moderate rates: every 1 ms they cost ~1 µs per answer at 20,000 DoT
// queries a second.
const watchEvery = 10 * time.Millisecond

// watchQuiet: the watchdog sleeps after this many looks in a row found
// no reader answering, until a reader answers again (a channel send that
// readers pay only then). Answers take microseconds, so looks rarely find
// one even under load: this sets how often it sleeps and is woken, not
// whether it sees a slow answer.
const watchQuiet = 10

// answerWatch is the server's watchdog over the answers that readers
// give themselves: TCP and TLS connection readers (see tcpConn) and UDP
// socket readers (Linux, see udpReader). Every watchEvery it looks at
// them; a connection reader that has been answering the same query since
// the previous look is relieved (a new goroutine takes over reading,
// owned by the connection like the old one), and a UDP reader still on
// the same batch has the batch taken over. Sources that wait for an
// upstream say so and are relieved at once without it: the watchdog finds
// what nothing announced. It sleeps while no reader answers anything, and
// runs until the server has shut down.
type answerWatch struct {
	once   sync.Once
	mu     sync.Mutex
	conns  watchList[*tcpConn]
	udps   watchList[*udpReader]
	parked atomic.Bool
	wake   chan struct{} // capacity 1
	every  time.Duration // how often it looks: watchEvery, or a test's
}

// startWatch starts the watchdog once (owned by s.workers, stopped by s.done).
func (s *Server) startWatch() {
	s.watch.once.Do(func() {
		s.watch.wake = make(chan struct{}, 1)
		s.workers.Add(1)
		go s.runWatch()
	})
}

// answering counts the answers a reader gives itself (a TCP connection's
// queries, a UDP reader's batches): odd while it gives one. Whoever makes
// it even first decides what happens to the answer's rest: the reader,
// done with it (take), or a takeover (a source's wait hook, or the
// watchdog seeing the same odd count at two looks). seen and idx are the
// watchdog's (under answerWatch.mu).
type answering struct {
	n    atomic.Uint64
	seen uint64
	idx  int
}

// begin counts an answer begun and returns its count.
func (a *answering) begin() uint64 { return a.n.Add(1) }

// take ends answer v; true for the first to do so.
func (a *answering) take(v uint64) bool { return a.n.CompareAndSwap(v, v+1) }

// watched is a reader the watchdog looks at: takeOver(v) takes over its
// answer v, if it is still on it.
type watched interface {
	answers() *answering
	takeOver(v uint64)
}

// takeOverNow takes over x's answer under way, if there is one: a wait
// hook, called by a source about to wait.
func takeOverNow(x watched) {
	if v := x.answers().n.Load(); v&1 == 1 {
		x.takeOver(v)
	}
}

// watchList is the watchdog's list of one kind of reader, in no order.
type watchList[T watched] struct{ items []T }

func (l *watchList[T]) add(x T) {
	x.answers().idx = len(l.items)
	l.items = append(l.items, x)
}

func (l *watchList[T]) remove(x T) {
	i, last := x.answers().idx, len(l.items)-1
	l.items[i] = l.items[last]
	l.items[i].answers().idx = i
	var zero T
	l.items[last] = zero
	l.items = l.items[:last]
}

// look takes over the answers still under way that were at the previous
// look; it reports whether any reader was answering.
func (l *watchList[T]) look() (busy bool) {
	for _, x := range l.items {
		a := x.answers()
		v := a.n.Load()
		if v&1 == 0 {
			continue
		}
		busy = true
		if v == a.seen {
			x.takeOver(v)
		}
		a.seen = v
	}
	return busy
}

// watchOn puts x in w's list l, and returns what takes it out again.
func watchOn[T watched](w *answerWatch, l *watchList[T], x T) (unwatch func()) {
	w.mu.Lock()
	l.add(x)
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		l.remove(x)
		w.mu.Unlock()
	}
}

// kick wakes the watchdog if it sleeps; a reader calls it after it has
// begun an answer.
func (w *answerWatch) kick() {
	if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (s *Server) runWatch() {
	defer s.workers.Done()
	w := &s.watch
	if w.every == 0 {
		w.every = watchEvery
	}
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	quiet := 0
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		if w.look() {
			quiet = 0
			continue
		}
		if quiet++; quiet < watchQuiet {
			continue
		}
		// Say so, then look once more: a reader that began its answer
		// before it could see parked is found here.
		w.parked.Store(true)
		if w.look() {
			w.parked.Store(false)
			quiet = 0
			continue
		}
		tick.Stop()
		select {
		case <-s.done:
			return
		case <-w.wake:
		}
		quiet = 0
		tick.Reset(w.every)
	}
}

// look takes over the readers that are still on the answer they were on
// at the previous look; it reports whether any reader was answering.
func (w *answerWatch) look() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	tcp := w.conns.look()
	return w.udps.look() || tcp
}
