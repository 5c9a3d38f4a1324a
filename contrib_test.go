package main

// contrib/: the systemd unit and sysusers entry, checked with systemd's
// own tools.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
