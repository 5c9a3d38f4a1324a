package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsd/dnsd/internal/dnstest"
)

// TestUpdateACME: a certificate is issued end to end by ACME DNS-01
// through dnsd. lego's client (acme-dns01, hack/acme) writes the
// challenge TXT record by a TSIG-signed update with the ACME key, which
// may write TXT at _acme-challenge names only; Pebble, the ACME test
// server, resolves the challenge through dnsd, issues the certificate,
// and lego deletes the record again. scripts/acme-tools.sh builds both.
func TestUpdateACME(t *testing.T) {
	pebble, certs, client := os.Getenv("DNSD_PEBBLE"), os.Getenv("DNSD_PEBBLE_CERTS"), os.Getenv("DNSD_ACME_CLIENT")
	if pebble == "" || client == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DNSD_PEBBLE and DNSD_ACME_CLIENT are not set (scripts/test.sh sets them from scripts/acme-tools.sh)")
		}
		t.Skip("no Pebble and ACME client: run eval \"$(scripts/acme-tools.sh)\" first")
	}
	dir, port, hport := updateZone(t)
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	pdir := t.TempDir()
	acmePort, mgmtPort := freePort(t), freePort(t)
	writeFile(t, filepath.Join(pdir, "pebble.json"), fmt.Sprintf(`{"pebble": {
  "listenAddress": "127.0.0.1:%d",
  "managementListenAddress": "127.0.0.1:%d",
  "certificate": %q,
  "privateKey": %q,
  "httpPort": %d,
  "tlsPort": %d,
  "ocspResponderURL": "",
  "externalAccountBindingRequired": false
}}`, acmePort, mgmtPort, filepath.Join(certs, "localhost", "cert.pem"), filepath.Join(certs, "localhost", "key.pem"), freePort(t), freePort(t)))
	p := startBinary(t, pebble, []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0"}, pdir,
		"-config", filepath.Join(pdir, "pebble.json"), "-dnsserver", addr)
	p.waitLog("ACME directory available", 1)

	out := t.TempDir()
	cmd := exec.Command(client, "-server", fmt.Sprintf("https://127.0.0.1:%d/dir", acmePort),
		"-ca", filepath.Join(certs, "pebble.minica.pem"), "-nameserver", addr,
		"-key", "acme-key", "-secret", acmeSecret, "-domain", "www.corp.internal", "-out", out)
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("acme-dns01: %v\n%s\npebble:\n%s", err, b, p.stderr.String())
	}
	t.Logf("certificate issued in %v", time.Since(start).Round(time.Millisecond))
	b, err := os.ReadFile(filepath.Join(out, "www.corp.internal.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("no PEM certificate in %s", b)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cert.DNSNames, "www.corp.internal") || time.Now().After(cert.NotAfter) {
		t.Errorf("certificate names %v, valid until %v", cert.DNSNames, cert.NotAfter)
	}
	// lego cleaned up: the challenge record is gone.
	if r, err := query(t, "udp", addr, "_acme-challenge.www.corp.internal.", dns.TypeTXT); err != nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("after issuance the challenge name answers %s %v, want NXDOMAIN", dnstest.RData(r), err)
	}
	_, m := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", hport))
	if !strings.Contains(m, `dnsd_updates_total{result="ok",zone="corp.internal."} 2`) {
		t.Errorf("want 2 applied updates (add, delete):\n%s", grep(m, "dnsd_updates_total"))
	}
}
