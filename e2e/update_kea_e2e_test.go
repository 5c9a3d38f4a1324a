package e2e

import (
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// TestUpdateKea: Kea's DHCP-DDNS server (kea-dhcp-ddns, D2) turns lease
// events into signed updates of the forward and reverse zones, with its
// RFC 4703 conflict resolution (DHCID records and prerequisites): a
// lease adds A, DHCID and PTR; another client's lease of the same name is
// turned away (its DHCID differs); the lease's release removes them. The
// lease events are the name change requests kea-dhcp4 sends D2, written
// by the test.
func TestUpdateKea(t *testing.T) {
	needTool(t, "kea-dhcp-ddns")
	dir, port, _ := updateZone(t)
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	d2Port := freePort(t)
	kdir := t.TempDir()
	writeFile(t, filepath.Join(kdir, "kea-dhcp-ddns.conf"), fmt.Sprintf(`{
"DhcpDdns": {
  "ip-address": "127.0.0.1",
  "port": %[1]d,
  "dns-server-timeout": 2000,
  "ncr-protocol": "UDP",
  "ncr-format": "JSON",
  "tsig-keys": [{"name": "dhcp-key", "algorithm": "HMAC-SHA256", "secret": %[2]q}],
  "forward-ddns": {"ddns-domains": [{"name": "corp.internal.", "key-name": "dhcp-key",
      "dns-servers": [{"ip-address": "127.0.0.1", "port": %[3]d}]}]},
  "reverse-ddns": {"ddns-domains": [{"name": "10.in-addr.arpa.", "key-name": "dhcp-key",
      "dns-servers": [{"ip-address": "127.0.0.1", "port": %[3]d}]}]},
  "loggers": [{"name": "kea-dhcp-ddns", "output_options": [{"output": "stdout"}], "severity": "DEBUG", "debuglevel": 40}]
}
}
`, d2Port, dhcpSecret, port))
	bin, _ := exec.LookPath("kea-dhcp-ddns")
	kea := startBinary(t, bin, []string{"KEA_PIDFILE_DIR=" + kdir, "KEA_LOCKFILE_DIR=" + kdir}, kdir, "-c", filepath.Join(kdir, "kea-dhcp-ddns.conf"))
	kea.waitLog("DHCP_DDNS_STARTED", 1)

	ncr := func(change int, fqdn, ip, dhcid string) {
		t.Helper()
		msg := fmt.Sprintf(`{"change-type": %d, "forward-change": true, "reverse-change": true, "fqdn": %q, "ip-address": %q, "dhcid": %q, "lease-expires-on": %q, "lease-length": 3600, "use-conflict-resolution": true}`,
			change, fqdn, ip, dhcid, time.Now().Add(time.Hour).UTC().Format("20060102150405"))
		c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", d2Port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...)); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(name string, qtype uint16) string {
		r, err := query(t, "udp", addr, name, qtype)
		if err != nil {
			return err.Error()
		}
		return dnstest.RData(r)
	}
	waitFor := func(what, name string, qtype uint16, want string) {
		t.Helper()
		dnstest.Eventually(t, fmt.Sprintf("%s: %s %s = %s", what, name, dns.TypeToString[qtype], want), 15*time.Second, func() bool {
			return answer(name, qtype) == want
		})
	}
	const (
		mine   = "000201C8A1C3D2E4F5061728394A5B6C7D8E9FA0B1C2D3E4F5061728394A5B6C7D8E"
		theirs = "0002019999999999999999999999999999999999999999999999999999999999999999"
	)
	ncr(0, "pc1.dhcp.corp.internal.", "10.3.0.5", mine)
	waitFor("a lease", "pc1.dhcp.corp.internal.", dns.TypeA, "NOERROR:10.3.0.5")
	waitFor("a lease", "5.0.3.10.in-addr.arpa.", dns.TypePTR, "NOERROR:pc1.dhcp.corp.internal.")
	if got := answer("pc1.dhcp.corp.internal.", dns.TypeDHCID); !strings.HasPrefix(got, "NOERROR:") || got == "NOERROR:" {
		t.Errorf("DHCID of the lease = %s", got)
	}

	// Another client asks for the same name: its DHCID differs, D2's
	// prerequisites fail, the first client keeps the name.
	ncr(0, "pc1.dhcp.corp.internal.", "10.3.0.6", theirs)
	kea.waitLog("DHCP_DDNS_ADD_FAILED", 1)
	if got := answer("pc1.dhcp.corp.internal.", dns.TypeA); got != "NOERROR:10.3.0.5" {
		t.Errorf("after another client's request, pc1 A = %s (the name is the first client's)", got)
	}

	// The release: D2 removes the forward records (their DHCID is the
	// lease's) and the PTR.
	ncr(1, "pc1.dhcp.corp.internal.", "10.3.0.5", mine)
	dnstest.Eventually(t, "the release removes pc1", 15*time.Second, func() bool {
		r, err := query(t, "udp", addr, "pc1.dhcp.corp.internal.", dns.TypeA)
		return err == nil && r.Rcode == dns.RcodeNameError
	})
	dnstest.Eventually(t, "the release removes the PTR", 15*time.Second, func() bool {
		r, err := query(t, "udp", addr, "5.0.3.10.in-addr.arpa.", dns.TypePTR)
		return err == nil && r.Rcode == dns.RcodeNameError
	})
}
