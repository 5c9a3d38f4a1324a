package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestCause(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`),
			"dial tcp 127.0.0.1:1: connect: connection refused"},
		{status.Error(codes.Unavailable, `last connection error: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`),
			"authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{fmt.Errorf("etcd http://127.0.0.1:2379: %w", errors.New("etcdserver: authentication failed, invalid user ID or password")),
			"authentication failed, invalid user ID or password"},
		{&url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/services?limit=500", Err: errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")},
			"dial tcp 127.0.0.1:6443: connect: connection refused"},
		// A connection's local port is new at every attempt: dropped, so
		// that two attempts failing alike have one cause.
		{&url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api", Err: errors.New("read tcp 127.0.0.1:52874->127.0.0.1:6443: read: connection reset by peer")},
			"read tcp 127.0.0.1:6443: read: connection reset by peer"},
		{errors.New("raw-read tcp [::1]:59084->[::1]:2379: use of closed network connection"),
			"raw-read tcp [::1]:2379: use of closed network connection"},
		// A server that accepts and never speaks: gRPC closes the
		// connection itself; say what happened, not its words for it.
		{status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: read tcp 127.0.0.1:59084->127.0.0.1:22099: use of closed network connection"`),
			"the server accepted the connection but did not answer (no HTTP/2 preface)"},
		{errors.New("plain"), "plain"},
		{nil, ""},
	} {
		if got := Cause(c.err); got != c.want {
			t.Errorf("Cause(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if !Vague(Cause(fmt.Errorf("etcd get: %w", context.DeadlineExceeded))) || Vague("connection refused") {
		t.Error("Vague")
	}
}

// One WARN when it starts failing, one more when the cause changes, DEBUG
// for repeats, one INFO when it recovers.
func TestTrackerLogsStateChanges(t *testing.T) {
	var buf bytes.Buffer
	tr := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	tr.Fail("down", "connection refused")
	tr.Fail("down", "connection refused")
	tr.Fail("down", "connection refused")
	if tr.Problem() != "connection refused" {
		t.Fatalf("problem %q", tr.Problem())
	}
	tr.Fail("down", "x509: certificate signed by unknown authority")
	tr.Recover("up")
	tr.Recover("up")
	out := buf.String()
	for s, n := range map[string]int{"level=WARN": 2, "level=DEBUG": 2, "level=INFO": 1, "(the cause changed)": 1, "previous_cause=\"connection refused\"": 1} {
		if got := strings.Count(out, s); got != n {
			t.Errorf("%q %d times, want %d:\n%s", s, got, n, out)
		}
	}
	if tr.Failing() {
		t.Error("still failing after Recover")
	}
}
