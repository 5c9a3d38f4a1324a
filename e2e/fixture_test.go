package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// config is a dnsd.yaml: the parts most tests share, built here, and the
// rest as the YAML an operator writes.
type config struct {
	// Listen are the listeners; empty: one on a free 127.0.0.1 port
	// (UDP and TCP).
	Listen []string
	// HTTP adds an http: endpoint on a free port (/metrics, /ready).
	HTTP bool
	// Log is the log: block, e.g. "{format: json, queries: true}".
	Log string
	// Zones is what goes under zones:, indented as in the file.
	Zones string
	// Extra is further top-level YAML (limits:, tls:, views: ...).
	Extra string
	// Env is added to the binary's environment.
	Env []string
}

// dnsd is a running binary started from a config.
type dnsd struct {
	*proc
	dir  string
	cfg  config
	Addr string // the first listener, host:port
	HTTP string // http://host:port of the http: endpoint, if any
	hp   int
}

// yaml renders c with the ports of d.
func (d *dnsd) yaml(c config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: [%s]\n", quoteAll(c.Listen))
	if c.HTTP {
		fmt.Fprintf(&b, "http: \"127.0.0.1:%d\"\n", d.hp)
	}
	if c.Log != "" {
		fmt.Fprintf(&b, "log: %s\n", c.Log)
	}
	if c.Extra != "" {
		b.WriteString(strings.TrimSuffix(c.Extra, "\n") + "\n")
	}
	fmt.Fprintf(&b, "zones:\n%s", c.Zones)
	if !strings.HasSuffix(c.Zones, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// start writes c as dnsd.yaml in a new directory (or dir, if given),
// starts the binary there and waits until it serves.
func start(t *testing.T, c config, dir ...string) *dnsd {
	t.Helper()
	d := &dnsd{dir: t.TempDir()}
	if len(dir) > 0 {
		d.dir = dir[0]
	}
	if len(c.Listen) == 0 {
		c.Listen = []string{fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	}
	d.Addr = strings.TrimPrefix(strings.TrimPrefix(c.Listen[0], "tls://"), "https://")
	if c.HTTP {
		d.hp = freePort(t)
		d.HTTP = fmt.Sprintf("http://127.0.0.1:%d", d.hp)
	}
	d.cfg = c
	writeFile(t, filepath.Join(d.dir, "dnsd.yaml"), d.yaml(c))
	d.proc = startBinary(t, dnsdBin, c.Env, d.dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	return d
}

// ask sends one query over netw ("udp", "tcp", "tcp-tls", "https": see
// dnstest.Client) to the first listener; an error ends the test.
func (d *dnsd) ask(netw, name string, qtype uint16) *dns.Msg {
	d.t.Helper()
	addr := d.Addr
	if netw == "https" {
		addr = "https://" + d.Addr + "/dns-query"
	}
	return dnstest.Client{Net: netw}.MustExchange(d.t, dnstest.Query(name, qtype), addr)
}

// reload writes the zones (and extra, when not empty) of a new
// configuration, with the listeners and ports kept, sends SIGHUP and
// waits for the reload's outcome: "reloaded" or "reload failed", the
// n-th time it is logged ("": no wait).
func (d *dnsd) reload(zones, extra, outcome string, n int) {
	d.t.Helper()
	c := d.cfg
	c.Zones = zones
	if extra != "" {
		c.Extra = extra
	}
	d.cfg = c
	writeFile(d.t, filepath.Join(d.dir, "dnsd.yaml"), d.yaml(c))
	d.signal(syscall.SIGHUP)
	if outcome != "" {
		d.waitLog(outcome, n)
	}
}

// metrics scrapes /metrics.
func (d *dnsd) metrics() string {
	d.t.Helper()
	if d.HTTP == "" {
		d.t.Fatal("no http: endpoint in this configuration")
	}
	code, body := httpGet(d.t, d.HTTP+"/metrics")
	if code != 200 {
		d.t.Fatalf("/metrics: HTTP %d", code)
	}
	return body
}

// waitMetric polls /metrics until it has the line (a whole line: name,
// labels and value).
func (d *dnsd) waitMetric(line string, within time.Duration) {
	d.t.Helper()
	var last string
	dnstest.EventuallyNil(d.t, within, func() error {
		last = d.metrics()
		if strings.Contains("\n"+last, "\n"+line+"\n") {
			return nil
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		return fmt.Errorf("no %q in /metrics: %s", line, grep(last, name))
	})
}
