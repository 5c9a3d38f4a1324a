package server

import (
	"net/netip"
	"sync"
	"time"
)

// Rate limiter bounds.
const (
	limiterShards = 64
	// limiterMaxKeys bounds the limiter's memory (about 40 B per key).
	// When a shard is full of active clients, new clients are not tracked
	// (allowed): failing open keeps real clients served under a flood of
	// spoofed sources.
	limiterMaxKeys  = 1 << 18
	limiterSweepGap = time.Second
)

// limiter is a per-client token bucket: rate responses per second with a
// burst of one second's worth, clients grouped by IPv4 /24 and IPv6 /56.
// Buckets idle for a second are full again, which is the same as absent,
// so each shard lazily deletes them at most once per limiterSweepGap: the
// map holds only recently active clients and needs no goroutine.
type limiter struct {
	epoch  time.Time
	shards [limiterShards]limShard
}

type limShard struct {
	mu        sync.Mutex
	m         map[uint64]bucket
	lastSweep int64
	_         [32]byte // keep shards on separate cache lines
}

type bucket struct {
	tokens float64
	last   int64 // ns since epoch
}

func newLimiter() *limiter {
	l := &limiter{epoch: time.Now()}
	for i := range l.shards {
		l.shards[i].m = make(map[uint64]bucket)
	}
	return l
}

// clientKey maps an (unmapped) address to its /24 or /56 group.
func clientKey(a netip.Addr) uint64 {
	if a.Is4() {
		b := a.As4()
		return 1<<63 | uint64(b[0])<<16 | uint64(b[1])<<8 | uint64(b[2])
	}
	b := a.As16()
	var k uint64
	for _, x := range b[:7] {
		k = k<<8 | uint64(x)
	}
	return k
}

// allow takes one token from client's bucket; rate is per second (> 0).
func (l *limiter) allow(client netip.Addr, rate int, now time.Time) bool {
	key := clientKey(client)
	sh := &l.shards[(key*0x9E3779B97F4A7C15)>>58]
	t := int64(now.Sub(l.epoch))
	burst := float64(rate)

	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.m[key]
	if !ok {
		if t-sh.lastSweep >= int64(limiterSweepGap) {
			sh.sweep(t)
		}
		if len(sh.m) >= limiterMaxKeys/limiterShards {
			return true
		}
		b = bucket{tokens: burst, last: t}
	} else {
		b.tokens += float64(t-b.last) / float64(time.Second) * float64(rate)
		if b.tokens > burst {
			b.tokens = burst
		}
		b.last = t
	}
	ok = b.tokens >= 1
	if ok {
		b.tokens--
	}
	sh.m[key] = b
	return ok
}

// sweep deletes buckets idle for at least a second (refilled: equivalent
// to no bucket). Caller holds sh.mu.
func (sh *limShard) sweep(t int64) {
	sh.lastSweep = t
	for k, b := range sh.m {
		if t-b.last >= int64(time.Second) {
			delete(sh.m, k)
		}
	}
}

// size is the number of tracked client groups (tests).
func (l *limiter) size() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
