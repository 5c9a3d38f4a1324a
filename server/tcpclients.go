package server

import "sync"

// tcpClients counts open TCP and TLS connections per client network (the
// /24 or /56 of clientKey) for max_tcp_per_client. Its map holds only
// networks with an open connection, so it is bounded by
// max_tcp_connections.
type tcpClients struct {
	mu sync.Mutex
	n  map[uint64]int
}

// add counts one more connection of key unless key already has max; it
// reports whether the connection may stay.
func (t *tcpClients) add(key uint64, max int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n[key] >= max {
		return false
	}
	if t.n == nil {
		t.n = make(map[uint64]int)
	}
	t.n[key]++
	return true
}

// remove forgets one connection of key.
func (t *tcpClients) remove(key uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n[key] <= 1 {
		delete(t.n, key)
		return
	}
	t.n[key]--
}

// len is the number of client networks with open connections (tests).
func (t *tcpClients) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.n)
}
