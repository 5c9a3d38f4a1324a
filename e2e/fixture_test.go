package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// The fixture: a dnsd.yaml (a config, or YAML text in which LISTEN and
// HTTP stand for free ports), the binary started from it, and what a test
// does with it: ask, reload, read the log, scrape /metrics.

// config builds a dnsd.yaml from the parts most tests share, with the rest
// as the YAML an operator writes.
type config struct {
	// Listen are the listeners, LISTEN standing for the free port's
	// address; empty: ["LISTEN"] (UDP and TCP).
	Listen []string
	// HTTP adds an http: endpoint on a free port (/metrics, /ready).
	HTTP bool
	// Log is the log: block, e.g. "{format: json, queries: true}".
	Log string
	// Extra is further top-level YAML (limits:, tls:, views: ...).
	Extra string
	// Zones is what goes under zones:, indented as in the file.
	Zones string
	// Env is added to the binary's environment.
	Env []string
}

// yaml is c as startYAML's template.
func (c config) yaml() string {
	listen := c.Listen
	if len(listen) == 0 {
		listen = []string{"LISTEN"}
	}
	q := make([]string, len(listen))
	for i, l := range listen {
		q[i] = fmt.Sprintf("%q", l)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "listen: [%s]\n", strings.Join(q, ", "))
	if c.HTTP {
		b.WriteString("http: \"HTTP\"\n")
	}
	if c.Log != "" {
		fmt.Fprintf(&b, "log: %s\n", c.Log)
	}
	if c.Extra != "" {
		b.WriteString(strings.TrimSuffix(c.Extra, "\n") + "\n")
	}
	b.WriteString("zones:\n" + strings.TrimSuffix(c.Zones, "\n") + "\n")
	return b.String()
}

// dnsd is a running binary started by start or startYAML.
type dnsd struct {
	*proc
	dir  string // its working directory, where dnsd.yaml is
	addr string // LISTEN: 127.0.0.1 and a port free for UDP and TCP
	base string // http://HTTP
	cfg  string // the path of dnsd.yaml
	// hport is the port of HTTP.
	hport int
}

// start writes c as dnsd.yaml and the files (name: content, relative to
// the directory) in a new directory, starts the binary there and waits
// until it serves.
func start(t *testing.T, c config, files map[string]string) *dnsd {
	t.Helper()
	return startEnv(t, c.yaml(), files, c.Env)
}

// startYAML is start with the whole dnsd.yaml as text, in which LISTEN
// and HTTP stand for 127.0.0.1 and a free port each.
func startYAML(t *testing.T, tmpl string, files map[string]string) *dnsd {
	t.Helper()
	return startEnv(t, tmpl, files, nil)
}

func startEnv(t *testing.T, tmpl string, files map[string]string, env []string) *dnsd {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name), content)
	}
	d := &dnsd{dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), hport: freePort(t)}
	d.base = fmt.Sprintf("http://127.0.0.1:%d", d.hport)
	d.cfg = filepath.Join(dir, "dnsd.yaml")
	writeFile(t, d.cfg, d.expand(tmpl))
	d.proc = startBinary(t, dnsdBin, env, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	return d
}

// expand replaces LISTEN and HTTP in tmpl by d's addresses.
func (d *dnsd) expand(tmpl string) string {
	r := strings.NewReplacer("LISTEN", d.addr, "HTTP", fmt.Sprintf("127.0.0.1:%d", d.hport))
	return r.Replace(tmpl)
}

// reload writes a new dnsd.yaml (a template as startYAML's; config.yaml
// makes one) and sends SIGHUP, waiting for the n-th "reloaded" (ok) or
// "reload failed" (!ok) log line; n 0: no wait.
func (d *dnsd) reload(t *testing.T, tmpl string, ok bool, n int) {
	t.Helper()
	writeFile(t, d.cfg, d.expand(tmpl))
	d.signal(syscall.SIGHUP)
	switch {
	case n == 0:
	case ok:
		d.waitLog("reloaded", n)
	default:
		d.waitLog("reload failed", n)
	}
}

// ask sends one query for name and qtype over netw ("udp", "tcp",
// "tcp-tls", "https": see dnstest.Client) to LISTEN (for "https", its
// /dns-query); an error ends the test.
func (d *dnsd) ask(netw, name string, qtype uint16) *dns.Msg {
	d.t.Helper()
	addr := d.addr
	if netw == "https" {
		addr = "https://" + d.addr + "/dns-query"
	}
	return dnstest.Client{Net: netw}.MustExchange(d.t, dnstest.Query(name, qtype), addr)
}

// metrics scrapes /metrics.
func (d *dnsd) metrics() string {
	d.t.Helper()
	code, body := httpGet(d.t, d.base+"/metrics")
	if code != 200 {
		d.t.Fatalf("/metrics: HTTP %d", code)
	}
	return body
}

// waitMetric polls /metrics until it has the line (name, labels, value).
func (d *dnsd) waitMetric(line string, within time.Duration) {
	d.t.Helper()
	name, _, _ := strings.Cut(line, "{")
	name, _, _ = strings.Cut(name, " ")
	dnstest.EventuallyNil(d.t, within, func() error {
		m := d.metrics()
		if strings.Contains("\n"+m, "\n"+line+"\n") {
			return nil
		}
		return fmt.Errorf("no %q in /metrics: %s", line, grep(m, name))
	})
}
