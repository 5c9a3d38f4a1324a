package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsd/dnsd/internal/testpki"
)

// bindZone is one zone of a BIND secondary: where it transfers it from.
type bindZone struct {
	name    string
	port    int  // dnsd's port for it
	tls     bool // over XoT (RFC 9103), without certificate checks
	withKey bool // the zone's primaries line names the key
}

// startBind starts BIND's named as a secondary of dnsd (127.0.0.1) on
// port, configured as docs/operations.md shows: a server statement that
// signs every request to dnsd with xfr-key, allow-notify from dnsd.
// It returns named's address.
func startBind(t *testing.T, port int, zones []bindZone) string {
	t.Helper()
	needTool(t, "named")
	named, _ := exec.LookPath("named")
	dir := filepath.Join(t.TempDir(), "bind")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var zs strings.Builder
	for _, z := range zones {
		prim := "127.0.0.1"
		if z.withKey {
			prim += " key xfr-key"
		}
		if z.tls {
			prim += " tls ephemeral"
		}
		fmt.Fprintf(&zs, `zone %q {
    type secondary;
    primaries port %d { %s; };
    allow-notify { 127.0.0.1; };
    file "%s/%s.db";
};
`, z.name, z.port, prim, dir, z.name)
	}
	writeFile(t, filepath.Join(dir, "named.conf"), fmt.Sprintf(`options {
    directory "%[1]s";
    pid-file "%[1]s/named.pid";
    session-keyfile "%[1]s/session.key";
    managed-keys-directory "%[1]s";
    listen-on port %[2]d { 127.0.0.1; };
    listen-on-v6 { none; };
    recursion no;
    dnssec-validation no;
    notify no;
    allow-transfer { none; };
};
key "xfr-key" {
    algorithm hmac-sha256;
    secret "%[3]s";
};
server 127.0.0.1 { keys { xfr-key; }; };
%[4]s`, dir, port, xfrSecret, zs.String()))
	p := startBinary(t, named, nil, dir, "-g", "-4", "-n", "1", "-c", filepath.Join(dir, "named.conf"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("named output:\n%s", p.stderr.String())
		}
	})
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// TestTransferToBind: a real BIND 9 secondary, set up as the operations
// guide shows, copies three zones from dnsd: one whose transfer item has
// the key BIND signs with, one whose item has no key (BIND signs that
// request too, since it has a key for the server: dnsd answers it
// signed), and one over DNS over TLS (XoT: ALPN "dot"). A change reaches
// BIND through dnsd's NOTIFY.
func TestTransferToBind(t *testing.T) {
	needTool(t, "named")
	dir := t.TempDir()
	dnsdPort, tlsPort, bindPort, hport := freePort(t), freePort(t), freePort(t), freePort(t)
	_, leaf := testpki.Server(t, "127.0.0.1") // named does not check it: "tls ephemeral"
	writeFile(t, filepath.Join(dir, "tls.crt"), string(leaf.CertPEM))
	writeFile(t, filepath.Join(dir, "tls.key"), string(leaf.KeyPEM))
	hosts := filepath.Join(dir, "example.hosts")
	writeFile(t, hosts, "10.0.0.10 db.example.internal\n")
	writeFile(t, filepath.Join(dir, "xfr.key"), xfrSecret+"\n")
	writeFile(t, filepath.Join(dir, "dnsd.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d", "tls://127.0.0.1:%d"]
http: "127.0.0.1:%d"
tls: {cert: tls.crt, key: tls.key}
zones:
  example.internal:
    - hosts: {files: [example.hosts]}
  lab.internal:
    - hosts: {entries: ["10.1.0.1 gw"]}
  xot.internal:
    - hosts: {entries: ["10.2.0.1 vault"]}
transfer:
  - zones: [example.internal, xot.internal]
    allow: [127.0.0.1]
    tsig: {name: xfr-key, algorithm: hmac-sha256, secret_file: xfr.key}
    notify: ["127.0.0.1:%d"]
  - zones: [lab.internal]
    allow: [127.0.0.1]
`, dnsdPort, tlsPort, hport, bindPort))
	d := startDnsd(t, dir, "-config", "dnsd.yaml")
	d.waitLog("dnsd started", 1)

	bind := startBind(t, bindPort, []bindZone{
		{name: "example.internal", port: dnsdPort, withKey: true},
		{name: "lab.internal", port: dnsdPort},
		{name: "xot.internal", port: tlsPort, tls: true, withKey: true},
	})
	waitBind := func(name, want string, within time.Duration) {
		t.Helper()
		if got, ok := secondaryAnswers(t, bind, name, want, within); !ok {
			t.Fatalf("named answers %s with %q, want %q", name, got, want)
		}
	}
	waitBind("db.example.internal.", "NOERROR:10.0.0.10", 30*time.Second)
	waitBind("gw.lab.internal.", "NOERROR:10.1.0.1", 10*time.Second)
	waitBind("vault.xot.internal.", "NOERROR:10.2.0.1", 10*time.Second)

	// A change: dnsd's NOTIFY makes named transfer it (its refresh is 4 h).
	time.Sleep(time.Second)
	writeFile(t, hosts, "10.0.0.10 db.example.internal\n10.0.0.11 new.example.internal\n")
	waitBind("new.example.internal.", "NOERROR:10.0.0.11", 15*time.Second)
}
