package e2e

// contrib/: the systemd unit and sysusers entry, checked with systemd's
// own tools; the Grafana dashboard and the Prometheus alerts, checked
// against the metrics dnsd exports.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// unitSettings parses a unit file into section.key -> values.
func unitSettings(t *testing.T, text string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("unit line %q", line)
			}
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	return out
}

// TestSystemdUnit: systemd-analyze verify accepts contrib/dnsd.service
// (with /usr/bin/dnsd pointing at the built binary, since verify checks
// that ExecStart= programs exist), prints nothing (unknown keys and bad
// values are only warnings there), and the unit holds the settings the
// docs promise.
func TestSystemdUnit(t *testing.T) {
	needTool(t, "systemd-analyze")
	text := readFile(t, "contrib/dnsd.service")
	dir := t.TempDir()
	unit := filepath.Join(dir, "dnsd.service")
	writeFile(t, unit, strings.ReplaceAll(text, "/usr/bin/dnsd", dnsdBin))
	// --man=no: the man pages are checked with the package (TestRelease).
	cmd := exec.Command("systemd-analyze", "verify", "--man=no", unit)
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	s := unitSettings(t, text)
	want := map[string]string{
		"Unit.Before":                     "nss-lookup.target",
		"Unit.After":                      "network-online.target",
		"Service.Type":                    "notify",
		"Service.ExecStartPre":            "/usr/bin/dnsd check -config /etc/dnsd/dnsd.yaml",
		"Service.ExecStart":               "/usr/bin/dnsd -config /etc/dnsd/dnsd.yaml",
		"Service.ExecReload":              "/bin/kill -HUP $MAINPID",
		"Service.User":                    "dnsd",
		"Service.AmbientCapabilities":     "CAP_NET_BIND_SERVICE",
		"Service.CapabilityBoundingSet":   "CAP_NET_BIND_SERVICE",
		"Service.NoNewPrivileges":         "yes",
		"Service.ProtectSystem":           "strict",
		"Service.ProtectHome":             "yes",
		"Service.PrivateTmp":              "yes",
		"Service.RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX AF_NETLINK",
		"Install.WantedBy":                "multi-user.target",
	}
	for k, v := range want {
		if got := s[k]; len(got) == 0 || got[len(got)-1] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if len(s["Service.WatchdogSec"]) == 0 {
		t.Error("no WatchdogSec=")
	}
	// The sandbox must leave /etc/dnsd readable: no ReadOnly/Inaccessible
	// rule may hide it.
	for _, k := range []string{"Service.InaccessiblePaths", "Service.TemporaryFileSystem"} {
		for _, v := range s[k] {
			if strings.Contains(v, "/etc") {
				t.Errorf("%s=%s hides /etc/dnsd", k, v)
			}
		}
	}

	// The ExecStartPre command line works as written (with a config).
	cfg := filepath.Join(dir, "dnsd.yaml")
	writeFile(t, cfg, "zones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n")
	args := strings.Fields(strings.ReplaceAll(s["Service.ExecStartPre"][0], "/etc/dnsd/dnsd.yaml", cfg))
	if out, err := exec.Command(dnsdBin, args[1:]...).CombinedOutput(); err != nil {
		t.Errorf("ExecStartPre %q: %v\n%s", args, err, out)
	}
}

// TestSysusers: systemd-sysusers reads contrib/dnsd.sysusers and would
// create user and group dnsd (checked in a scratch root, nothing on this
// machine changes).
func TestSysusers(t *testing.T) {
	needTool(t, "systemd-sysusers")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Where the packages install it.
	if err := os.MkdirAll(filepath.Join(root, "usr/lib/sysusers.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "usr/lib/sysusers.d/dnsd.conf"), readFile(t, "contrib/dnsd.sysusers"))
	out, err := exec.Command("systemd-sysusers", "--root", root).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd := readFile(t, filepath.Join(root, "etc/passwd"))
	group := readFile(t, filepath.Join(root, "etc/group"))
	if !strings.Contains(passwd, "dnsd:x:") || !strings.Contains(passwd, ":/usr/sbin/nologin") || !strings.Contains(group, "dnsd:x:") {
		t.Errorf("sysusers made passwd %q group %q; want user and group dnsd without a login shell", passwd, group)
	}
}

// knownMetrics are the metric names dnsd exports: every "dnsd_..." string
// literal in the non-test Go code (with the _bucket/_sum/_count series of
// histograms), the counters the hardening work adds, and the standard
// collectors' names used by the kit.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{
		"up": true, "process_resident_memory_bytes": true, "go_goroutines": true,
		// Counted by the server's protection (docs/operations.md, Metrics).
		"dnsd_dropped_total": true, "dnsd_panics_total": true, "dnsd_tcp_connections_rejected_total": true,
	}
	lit := regexp.MustCompile(`"(dnsd_[a-z_]+[a-z])"`)
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "hack" || d.Name() == "bench" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for _, m := range lit.FindAllStringSubmatch(readFile(t, path), -1) {
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				known[m[1]+suffix] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return known
}

// metricRef matches the metric names of an expression (dnsd's and the
// standard collectors'; label values never look like them).
var metricRef = regexp.MustCompile(`\b(dnsd_[a-z_]*[a-z]|process_[a-z_]*[a-z]|go_[a-z_]*[a-z])\b`)

// checkExpr reports metric names in a PromQL expression that dnsd does not
// export, and returns the names it found.
func checkExpr(t *testing.T, where, expr string, known map[string]bool) []string {
	t.Helper()
	var names []string
	for _, m := range metricRef.FindAllStringSubmatch(expr, -1) {
		names = append(names, m[1])
		if !known[m[1]] {
			t.Errorf("%s: %s is not a metric dnsd exports (expr %s)", where, m[1], expr)
		}
	}
	if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
		t.Errorf("%s: unbalanced expression %s", where, expr)
	}
	return names
}

// TestGrafanaDashboard: valid JSON, every panel queries metrics dnsd
// exports, and the panels the docs promise are there.
func TestGrafanaDashboard(t *testing.T) {
	known := knownMetrics(t)
	var dash struct {
		Title  string
		Panels []struct {
			ID      int
			Type    string
			Title   string
			GridPos struct{ X, Y, W, H int }
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal([]byte(readFile(t, "contrib/grafana-dashboard.json")), &dash); err != nil {
		t.Fatalf("contrib/grafana-dashboard.json: %v", err)
	}
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W <= 0 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range checkExpr(t, "panel "+p.Title, tg.Expr, known) {
				used[n] = true
			}
		}
	}
	for _, want := range []string{"dnsd_requests_total", "dnsd_responses_total", "dnsd_request_duration_seconds_bucket",
		"dnsd_cache_hits_total", "dnsd_cache_misses_total", "dnsd_forward_upstream_up", "dnsd_source_synced",
		"dnsd_reload_total", "dnsd_dropped_total", "dnsd_panics_total", "dnsd_tcp_connections_rejected_total",
		"dnsd_transfers_total", "dnsd_secondary_transfers_total", "dnsd_notify_total", "dnsd_updates_total",
		"dnsd_update_duration_seconds_bucket", "dnsd_forward_request_duration_seconds_bucket"} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
	byView := false
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			byView = byView || regexp.MustCompile(`by \([^)]*\bview\b`).MatchString(tg.Expr)
		}
	}
	if !byView {
		t.Error("no panel shows the queries by view")
	}
	// Every metric a panel shows is in docs/operations.md's Metrics table,
	// where an operator looks up what it means (the standard process and
	// Go collectors, which the table names as a whole, aside).
	documented := operationsMetrics(t)
	for n := range used {
		if !documented[n] && !strings.HasPrefix(n, "process_") && !strings.HasPrefix(n, "go_") {
			t.Errorf("a panel shows %s, which docs/operations.md's Metrics table does not list", n)
		}
	}
}

// operationsMetrics are the metrics of docs/operations.md's Metrics table
// (with the _bucket, _sum and _count series of its histograms).
func operationsMetrics(t *testing.T) map[string]bool {
	t.Helper()
	docs := readFile(t, "docs/operations.md")
	start := strings.Index(docs, "\n## Metrics\n")
	if start < 0 {
		t.Fatal("docs/operations.md has no Metrics section")
	}
	section := docs[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	row := regexp.MustCompile("(?m)^\\| `(dnsd_[a-z_]+[a-z])` \\|[^|]*\\|([^\n]*)\\|$")
	names := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		names[m[1]] = true
		if strings.Contains(m[2], "histogram") {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("docs/operations.md's Metrics table: %d metrics found, want at least 10", len(names))
	}
	return names
}

// TestPrometheusAlerts: valid rule groups whose expressions use metrics
// dnsd exports, with the alerts docs/operations.md lists.
func TestPrometheusAlerts(t *testing.T) {
	known := knownMetrics(t)
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				For         string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, "contrib/prometheus-alerts.yaml")))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("contrib/prometheus-alerts.yaml: %v", err)
	}
	alerts := map[string]bool{}
	promDuration := regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: alert, expr, labels.severity and annotations.summary are required", r)
			}
			if r.For != "" && !promDuration.MatchString(r.For) {
				t.Errorf("%s: for: %q is not a Prometheus duration", r.Alert, r.For)
			}
			checkExpr(t, "alert "+r.Alert, r.Expr, known)
		}
	}
	docs := readFile(t, "docs/operations.md")
	for _, want := range []string{"DnsdDown", "DnsdSourceNotSynced", "DnsdUpstreamDown", "DnsdReloadFailed",
		"DnsdServfailRatioHigh", "DnsdDropsRising", "DnsdPanics"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
	for a := range alerts {
		if !strings.Contains(docs, a) {
			t.Errorf("docs/operations.md does not explain alert %s", a)
		}
	}
}

// TestPostinstallOwnership runs the package's postinstall script with
// the commands it calls replaced by stand-ins that log their arguments
// (nothing on this machine is changed): a first install gives /etc/dnsd
// and its config to group dnsd; an upgrade leaves the group alone unless
// it is root (what RPM leaves behind), and then gives it back to dnsd.
func TestPostinstallOwnership(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		group string // what stat says
		want  []string
		not   []string
	}{
		{"first install (deb)", []string{"configure", ""}, "root", []string{"chown root:dnsd /etc/dnsd /etc/dnsd/dnsd.yaml", "chmod 0750 /etc/dnsd"}, []string{"chgrp"}},
		{"first install (rpm)", []string{"1"}, "root", []string{"chown root:dnsd /etc/dnsd /etc/dnsd/dnsd.yaml"}, []string{"chgrp"}},
		{"upgrade, group reset to root (rpm)", []string{"2"}, "root", []string{"chgrp dnsd /etc/dnsd", "chgrp dnsd /etc/dnsd/dnsd.yaml"}, []string{"chown", "chmod"}},
		{"upgrade, the operator's group kept (deb)", []string{"configure", "1.0.0"}, "dnsadmins", nil, []string{"chown", "chmod", "chgrp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			log := filepath.Join(bin, "log")
			for _, cmd := range []string{"chown", "chmod", "chgrp", "getent", "systemctl", "runuser", "useradd", "adduser"} {
				writeFile(t, filepath.Join(bin, cmd), "#!/bin/sh\necho \""+cmd+" $*\" >> \"$LOG\"\n")
			}
			writeFile(t, filepath.Join(bin, "stat"), "#!/bin/sh\necho "+tc.group+"\n")
			for _, f := range []string{"chown", "chmod", "chgrp", "getent", "systemctl", "runuser", "useradd", "adduser", "stat"} {
				if err := os.Chmod(filepath.Join(bin, f), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// The kernel setting it applies: stand-ins too, under a
			// path the script can hold unquoted (a test name has "(").
			sysctl, err := os.MkdirTemp("", "dnsd-postinst-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(sysctl) })
			writeFile(t, filepath.Join(sysctl, "rmem_max"), "212992\n")
			writeFile(t, filepath.Join(sysctl, "systemd-sysctl"), "#!/bin/sh\necho \"systemd-sysctl $*\" >> \"$LOG\"\n")
			if err := os.Chmod(filepath.Join(sysctl, "systemd-sysctl"), 0o755); err != nil {
				t.Fatal(err)
			}
			script := filepath.Join(sysctl, "postinstall.sh")
			writeFile(t, script, strings.NewReplacer("/usr/lib/systemd/systemd-sysctl", filepath.Join(sysctl, "systemd-sysctl"),
				"/proc/sys/net/core/rmem_max", filepath.Join(sysctl, "rmem_max")).Replace(readFile(t, "contrib/packaging/postinstall.sh")))
			cmd := exec.Command("/bin/sh", append([]string{script}, tc.args...)...)
			cmd.Env = []string{"PATH=" + bin, "LOG=" + log}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("postinstall %v: %v\n%s", tc.args, err, out)
			}
			got, _ := os.ReadFile(log)
			for _, w := range tc.want {
				if !strings.Contains(string(got), w+"\n") {
					t.Errorf("postinstall %v did not run %q; ran:\n%s", tc.args, w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(string(got), n+" ") {
					t.Errorf("postinstall %v ran %s; ran:\n%s", tc.args, n, got)
				}
			}
		})
	}
}

// alertRules reads the rule groups of contrib/prometheus-alerts.yaml:
// alert name -> expression.
func alertRules(t *testing.T) map[string]string {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "contrib/prometheus-alerts.yaml")), &rules); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// TestPrometheusAlertRulesFire: promtool accepts the rules and passes
// their unit tests (contrib/prometheus-alerts.test.yaml), which hold, for
// every alert, a case where it must fire.
func TestPrometheusAlertRulesFire(t *testing.T) {
	needTool(t, "promtool")
	if out, err := exec.Command("promtool", "check", "rules", "contrib/prometheus-alerts.yaml").CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	cmd := exec.Command("promtool", "test", "rules", "prometheus-alerts.test.yaml")
	cmd.Dir = "contrib"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		}
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "contrib/prometheus-alerts.test.yaml")), &tests); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	for a := range alertRules(t) {
		if !fires[a] {
			t.Errorf("contrib/prometheus-alerts.test.yaml has no case where %s fires", a)
		}
	}
}

// selector matches a metric name with its label matchers in PromQL.
var selector = regexp.MustCompile(`\b(dnsd_[a-z_]*[a-z])\b(\{([^}]*)\})?`)

// matcher matches one label matcher: name, operator, value.
var matcher = regexp.MustCompile(`([a-z_]+)\s*(=~|=)\s*"([^"]*)"`)

// TestAlertSeriesAtStart: right after dnsd starts, before any query,
// transfer or NOTIFY, /metrics has every series the alert rules select
// (at 0) for a configured transferred zone with a secondary to notify, a
// secondary source that never syncs and a forward upstream that never
// answers: a rule comparing failures with successes sees both.
func TestAlertSeriesAtStart(t *testing.T) {
	dead := freePort(t) // nothing listens there
	conf := func(transferred string) config {
		return config{HTTP: true, Extra: "state_dir: ./state\n" + fmt.Sprintf(`transfer:
  - zones: [%s]
    allow: [127.0.0.1]
    notify: ["127.0.0.1:%d"]
`, transferred, dead), Zones: fmt.Sprintf(`  example.internal:
    - hosts: {entries: ["10.0.0.1 a"]}
  lab.internal:
    - hosts: {entries: ["10.0.1.1 b"]}
  partner.example:
    - secondary: {primaries: ["127.0.0.1:%d"]}
  fwd.example:
    - forward: {upstreams: ["127.0.0.1:%d"]}
`, dead, dead)}
	}
	d := start(t, conf("example.internal"), nil)
	defer func() {
		// A zone a reload adds to transfer: its series at once.
		d.reload(t, conf("example.internal, lab.internal").yaml(), true, 1)
		m := d.metrics()
		for _, line := range []string{
			`dnsd_notify_total{result="acked",zone="lab.internal."} 0`,
			`dnsd_transfers_total{result="success",zone="lab.internal."} 0`,
		} {
			if !strings.Contains(m, line+"\n") {
				t.Errorf("after the reload, no %s:\n%s", line, grep(m, "lab.internal"))
			}
		}
	}()
	m := d.metrics()
	// series reports whether /metrics has a sample of name whose labels
	// include every one of want (name="value" strings).
	series := func(name string, want ...string) bool {
		for _, line := range strings.Split(m, "\n") {
			if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
				continue
			}
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(line, w)
			}
			if ok {
				return true
			}
		}
		return false
	}
	for alert, expr := range alertRules(t) {
		for _, s := range selector.FindAllStringSubmatch(expr, -1) {
			name := s[1]
			if name == "dnsd_responses_total" {
				continue // counts answers: no queries, no ratio to alert on
			}
			var zone []string
			if name == "dnsd_transfers_total" || name == "dnsd_notify_total" {
				zone = []string{`zone="example.internal."`}
			}
			ms := matcher.FindAllStringSubmatch(s[3], -1)
			if len(ms) == 0 && !series(name, zone...) {
				t.Errorf("%s: no %s%v series at start:\n%s", alert, name, zone, grep(m, name))
			}
			for _, mt := range ms {
				values := []string{mt[3]}
				if mt[2] == "=~" {
					values = strings.Split(mt[3], "|")
				}
				for _, v := range values {
					want := append([]string{mt[1] + `="` + v + `"`}, zone...)
					if !series(name, want...) {
						t.Errorf("%s: no %s%v series at start:\n%s", alert, name, want, grep(m, name))
					}
				}
			}
		}
	}
	for _, line := range []string{
		`dnsd_notify_total{result="acked",zone="example.internal."} 0`,
		`dnsd_transfers_total{result="success",zone="example.internal."} 0`,
	} {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("no %s:\n%s", line, grep(m, "example.internal"))
		}
	}
	if !series("dnsd_source_synced", "} 0") {
		t.Errorf("no unsynced source (the secondary's primary never answers):\n%s", grep(m, "dnsd_source_synced"))
	}
}
