package health

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/status"
)

// Tracker is one backend's health. The zero value is not usable; create
// one with New. It is safe for concurrent use.
type Tracker struct {
	log *slog.Logger

	mu      sync.Mutex
	cause   string    // "" while healthy
	since   time.Time // when the current problem began
	repeats int       // failures since the last logged line
}

// New returns a healthy tracker that logs to log (nil: nowhere).
func New(log *slog.Logger) *Tracker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Tracker{log: log}
}

// Problem is the current cause, "" while the backend is healthy.
func (t *Tracker) Problem() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cause
}

// Failing reports whether there is a current problem.
func (t *Tracker) Failing() bool { return t.Problem() != "" }

// Fail records cause as the current problem. The first failure after a
// healthy state is logged at WARN with msg; a failure with another cause
// than the current one is logged at WARN too ("the reason changed");
// repeats of the same cause are logged at DEBUG. An empty cause is
// ignored.
func (t *Tracker) Fail(msg, cause string, attrs ...any) {
	if cause == "" {
		return
	}
	t.mu.Lock()
	prev := t.cause
	lvl := slog.LevelDebug
	switch {
	case prev == "":
		t.cause, t.since, t.repeats = cause, time.Now(), 0
		lvl = slog.LevelWarn
	case prev != cause:
		t.cause, t.repeats = cause, 0
		lvl = slog.LevelWarn
		attrs = append(attrs, "previous_cause", prev)
	default:
		t.repeats++
		attrs = append(attrs, "repeats", t.repeats)
	}
	t.mu.Unlock()
	if lvl == slog.LevelWarn && prev != "" {
		msg = strings.TrimSuffix(msg, ".") + " (the cause changed)"
	}
	t.log.Log(context.Background(), lvl, msg, append([]any{"cause", cause}, attrs...)...)
}

// Recover clears the current problem; if there was one, it logs msg at
// INFO with how long it lasted.
func (t *Tracker) Recover(msg string, attrs ...any) {
	t.mu.Lock()
	prev, since := t.cause, t.since
	t.cause, t.repeats = "", 0
	t.mu.Unlock()
	if prev == "" {
		return
	}
	t.log.Info(msg, append(attrs, "after", time.Since(since).Round(time.Millisecond), "previous_cause", prev)...)
}

// Cause reduces err to the part a person can act on: the message of a
// gRPC status without its transport wrappers, the error behind a URL
// (not the URL with its query), an etcd server error without its
// "etcdserver:" prefix. It never adds anything that err did not say, so
// it never carries a secret that err did not carry.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	// Wrappers that gRPC and etcd put around the real cause.
	noise := [...]string{
		"last connection error: ",
		"connection error: desc = ",
		"transport: ",
		"Error while dialing: ",
		"error reading server preface: ",
		"etcdserver: ",
	}
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
	}
	if strings.Contains(msg, "error reading server preface") && strings.Contains(msg, "use of closed network connection") {
		// gRPC gave up waiting for the server's first frame and closed
		// the connection itself: the server accepted it and said nothing.
		return "the server accepted the connection but did not answer (no HTTP/2 preface)"
	}
	for changed := true; changed; {
		changed = false
		msg = strings.TrimSpace(msg)
		if u, uerr := unquote(msg); uerr == nil {
			msg, changed = u, true
		}
		for _, p := range noise {
			if i := strings.Index(msg, p); i >= 0 && (i == 0 || strings.HasSuffix(msg[:i], ": ") || strings.HasSuffix(msg[:i], "; ")) {
				msg, changed = msg[i+len(p):], true
				break
			}
		}
	}
	return withoutLocalAddr(msg)
}

// withoutLocalAddr drops the local address of a connection's error ("read
// tcp 127.0.0.1:52874->10.0.0.1:443: read: connection reset by peer"
// becomes "read tcp 10.0.0.1:443: ..."): its port is new at every attempt,
// and a cause that differs only there is the same cause, logged once.
func withoutLocalAddr(msg string) string {
	i := strings.Index(msg, "->")
	if i <= 0 {
		return msg
	}
	j := strings.LastIndexByte(msg[:i], ' ')
	local := msg[j+1 : i]
	if j < 0 || !strings.Contains(local, ":") || strings.ContainsAny(local, "\"'") {
		return msg
	}
	return msg[:j+1] + msg[i+2:]
}

// unquote strips one level of double quotes around s.
func unquote(s string) (string, error) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `\"`, `"`), nil
	}
	return s, errors.New("not quoted")
}

// Vague reports whether cause says nothing about why (a timeout or a
// cancellation of our own): it should not replace a known cause.
func Vague(cause string) bool {
	return cause == "" ||
		strings.HasSuffix(cause, context.DeadlineExceeded.Error()) ||
		strings.HasSuffix(cause, context.Canceled.Error())
}
