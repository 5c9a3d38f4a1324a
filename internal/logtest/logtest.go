package logtest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a goroutine-safe bytes.Buffer for log lines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count is how many times s was written so far.
func (l *Buffer) Count(s string) int { return strings.Count(l.String(), s) }
