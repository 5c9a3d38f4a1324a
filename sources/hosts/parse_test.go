package hosts

import (
	"bytes"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestBadLinesLogged: bad lines are logged with FILE:LINE, the first
// maxBadLinesLogged of them, then one count, whether the file is parsed
// whole or in two halves at once.
func TestBadLinesLogged(t *testing.T) {
	var sb strings.Builder
	var want []string
	for i := 1; i <= 60; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&sb, "10.0.0.%d not_a%%name\n", i) // line i is bad
			want = append(want, fmt.Sprintf("at=f.hosts:%d", i))
		} else {
			fmt.Fprintf(&sb, "10.0.0.%d host%d.example.\n", i, i)
		}
	}
	// Halves (parallel from 0) are parsed at once, or one after the
	// other with one processor.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, run := range []struct{ parallel, procs int }{{1 << 30, 2}, {0, 2}, {0, 1}} {
		parallel := run.parallel
		runtime.GOMAXPROCS(run.procs)
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))
		parts := parseDataFrom("f.hosts", []byte(sb.String()), logger, parallel, nil)
		if parts.pairs() != 30 || parts.bad() != 30 {
			t.Fatalf("parallel from %d: %d pairs, %d bad; want 30, 30", parallel, parts.pairs(), parts.bad())
		}
		got := regexp.MustCompile(`at=f\.hosts:\d+`).FindAllString(logs.String(), -1)
		if strings.Join(got, " ") != strings.Join(want[:maxBadLinesLogged], " ") {
			t.Errorf("parallel from %d: logged %v, want %v", parallel, got, want[:maxBadLinesLogged])
		}
		if !strings.Contains(logs.String(), "more bad lines skipped") || !strings.Contains(logs.String(), "total=30") {
			t.Errorf("parallel from %d: no count of the rest:\n%s", parallel, logs.String())
		}
		for _, p := range partsPairs(parts) {
			if !strings.HasPrefix(p.name, "host") || !strings.HasSuffix(p.name, ".example.") {
				t.Errorf("parallel from %d: name %q", parallel, p.name)
			}
		}
	}
}
