package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// names is how many names the in-memory scenarios hold and query.
const names = 10000

func hostName(i int) string { return fmt.Sprintf("host%d.example.internal.", i) }
func hostIP(i int) string   { return fmt.Sprintf("10.1.%d.%d", i>>8&255, i&255) }

// referenceIP is the one address bench/reference answers with.
const referenceIP = "10.0.0.10"

// scenario is one query load and the data every server serves for it.
type scenario struct {
	name, title string
	transport   string            // udp, tcp or dot (dnsperf's -m)
	queryFile   string            // in the working directory, dnsperf's format
	queries     string            // its path
	servers     []string          // the servers that can serve it, with the reference
	labels      map[string]string // how a server serves it, when worth saying
	nxShare     float64           // share of the queries that must be NXDOMAIN

	upstream, etcd int    // the forward upstream's and etcd's ports, while running
	kubeconfig     string // the kube-apiserver's, while running
}

func (s *scenario) supports(srv string) bool { return contains(s.servers, srv) }

var allScenarios = []scenario{
	{name: "hosts", title: "hosts hits", transport: "udp", queryFile: "hits.queries",
		servers: []string{"reference", "dnsd", "unbound", "coredns", "dnsmasq"},
		labels:  map[string]string{"unbound": "local-data", "coredns": "hosts", "dnsmasq": "addn-hosts"}},
	{name: "nxdomain", title: "20 % NXDOMAIN", transport: "udp", queryFile: "nx.queries", nxShare: 0.2,
		servers: []string{"reference", "dnsd", "unbound", "coredns", "dnsmasq"},
		labels:  map[string]string{"unbound": "local-data", "coredns": "file", "dnsmasq": "addn-hosts"}},
	{name: "forward", title: "forward, warm cache", transport: "udp", queryFile: "forward.queries",
		servers: []string{"reference", "dnsd", "unbound", "coredns", "dnsmasq"},
		labels:  map[string]string{"coredns": "cache+forward"}},
	{name: "file", title: "zone file hits", transport: "udp", queryFile: "hits.queries",
		servers: []string{"reference", "dnsd", "unbound", "coredns"},
		labels:  map[string]string{"dnsd": "file", "unbound": "local-data", "coredns": "file"}},
	{name: "etcd", title: "etcd hits", transport: "udp", queryFile: "hits.queries",
		servers: []string{"reference", "dnsd", "coredns"},
		labels:  map[string]string{"coredns": "cache+etcd"}},
	{name: "kubernetes", title: "kubernetes hits", transport: "udp", queryFile: "k8s.queries",
		servers: []string{"reference", "dnsd", "coredns"},
		labels:  map[string]string{"coredns": "kubernetes"}},
	{name: "tcp", title: "TCP, pipelined", transport: "tcp", queryFile: "hits.queries",
		servers: []string{"reference", "dnsd", "unbound", "coredns"},
		labels:  map[string]string{"coredns": "hosts"}},
	{name: "dot", title: "DNS over TLS", transport: "dot", queryFile: "hits.queries",
		servers: []string{"reference", "dnsd", "unbound", "coredns"},
		labels:  map[string]string{"coredns": "tls+hosts"}},
}

func scenarioNames() []string {
	var n []string
	for _, s := range allScenarios {
		n = append(n, s.name)
	}
	return n
}

// pickScenarios returns the scenarios named in the comma-separated list,
// in the standard order; all of them for an empty list, but kubernetes
// only with a kube-apiserver (k8s).
func pickScenarios(list string, k8s bool) ([]scenario, error) {
	if list == "" {
		var out []scenario
		for _, s := range allScenarios {
			if s.name != "kubernetes" || k8s {
				out = append(out, s)
			}
		}
		return out, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		if !contains(scenarioNames(), n) {
			return nil, fmt.Errorf("no scenario %q (have %s)", n, strings.Join(scenarioNames(), ","))
		}
		if n == "kubernetes" && !k8s {
			return nil, fmt.Errorf("the kubernetes scenario needs -kube-apiserver")
		}
		want[n] = true
	}
	var out []scenario
	for _, s := range allScenarios {
		if want[s.name] {
			out = append(out, s)
		}
	}
	return out, nil
}

// writeData writes the data every server serves and the query files.
func (e *env) writeData() error {
	var hosts, zone, unbound, records, hits, nx, fwd, k8s strings.Builder
	zone.WriteString("$ORIGIN example.internal.\n$TTL 3600\n@ IN SOA ns.example.internal. hostmaster.example.internal. 1 7200 3600 1209600 3600\n@ IN NS ns\nns IN A 10.0.0.1\n")
	unbound.WriteString("    local-zone: \"example.internal.\" static\n" +
		"    local-data: \"example.internal. 3600 IN SOA ns.example.internal. hostmaster.example.internal. 1 7200 3600 1209600 3600\"\n")
	for i := 0; i < names; i++ {
		n, ip := hostName(i), hostIP(i)
		fmt.Fprintf(&hosts, "%s %s\n", ip, strings.TrimSuffix(n, "."))
		fmt.Fprintf(&zone, "%s 3600 IN A %s\n", n, ip)
		fmt.Fprintf(&unbound, "    local-data: \"%s 3600 IN A %s\"\n", n, ip)
		fmt.Fprintf(&records, "/skydns/internal/example/host%d\t{\"host\":%q,\"ttl\":3600}\n", i, ip)
		fmt.Fprintf(&hits, "%s A\n", n)
		if i%5 == 4 {
			fmt.Fprintf(&nx, "missing%d.example.internal. A\n", i)
		} else {
			fmt.Fprintf(&nx, "%s A\n", n)
		}
		fmt.Fprintf(&fwd, "name%d.example.com. A\n", i)
	}
	for i := 0; i < k8sServices; i++ {
		fmt.Fprintf(&k8s, "%s A\n", k8sName(i))
	}
	for file, s := range map[string]*strings.Builder{
		"hosts": &hosts, "example.internal.zone": &zone, "unbound-local.conf": &unbound, "etcd.records": &records,
		"hits.queries": &hits, "nx.queries": &nx, "forward.queries": &fwd, "k8s.queries": &k8s,
	} {
		if err := os.WriteFile(filepath.Join(e.dir, file), []byte(s.String()), 0o644); err != nil {
			return err
		}
	}
	e.cert, e.key = filepath.Join(e.dir, "tls.crt"), filepath.Join(e.dir, "tls.key")
	return writeCert(e.cert, e.key)
}

// writeCert writes a self-signed certificate for 127.0.0.1 (the load
// generators do not verify it).
func writeCert(certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dnsd-bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

// command writes srv's configuration for sc and returns its command line;
// the server listens on 127.0.0.1:port (UDP and TCP) and, for DoT, on
// 127.0.0.1:tlsPort.
func (e *env) command(srv string, sc *scenario, port, tlsPort int) ([]string, error) {
	path := func(f string) string { return filepath.Join(e.dir, f) }
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", tlsPort)
	conf := path(fmt.Sprintf("%s-%s.conf", sc.name, srv))
	write := func(s string) error { return os.WriteFile(conf, []byte(s), 0o644) }
	switch srv {
	case "reference":
		argv := []string{filepath.Join(e.bin, "reference"), "-addr", addr, "-tcp", addr}
		if sc.transport == "dot" {
			argv = append(argv, "-tls", tlsAddr, "-cert", e.cert, "-key", e.key)
		}
		return argv, nil

	case "dnsd":
		listen := fmt.Sprintf("%q", addr)
		if sc.transport == "dot" {
			listen += fmt.Sprintf(", \"tls://%s\"", tlsAddr)
		}
		var y strings.Builder
		fmt.Fprintf(&y, "listen: [%s]\nlog: {level: warn}\n", listen)
		if sc.transport == "dot" {
			fmt.Fprintf(&y, "tls: {cert: %s, key: %s}\n", e.cert, e.key)
		}
		y.WriteString("zones:\n")
		switch sc.name {
		case "forward":
			fmt.Fprintf(&y, "  .:\n    - forward: {upstreams: [\"127.0.0.1:%d\"]}\n", sc.upstream)
		case "kubernetes":
			fmt.Fprintf(&y, "  cluster.local:\n    - kubernetes: {kubeconfig: %s, context: test, sync_timeout: 60s}\n", sc.kubeconfig)
		case "etcd":
			fmt.Fprintf(&y, "  example.internal:\n    - etcd: {endpoints: [\"http://127.0.0.1:%d\"], prefix: /skydns}\n", sc.etcd)
		case "file":
			fmt.Fprintf(&y, "  example.internal:\n    - file: {path: %s}\n", path("example.internal.zone"))
		default:
			fmt.Fprintf(&y, "  example.internal:\n    - hosts: {files: [%s]}\n", path("hosts"))
		}
		return []string{filepath.Join(e.bin, "dnsd"), "-config", conf}, write(y.String())

	case "unbound":
		var u strings.Builder
		fmt.Fprintf(&u, `server:
    num-threads: 1
    interface: 127.0.0.1@%d
    port: %d
    do-daemonize: no
    username: ""
    chroot: ""
    directory: %q
    pidfile: ""
    use-syslog: no
    logfile: ""
    verbosity: 0
    access-control: 127.0.0.0/8 allow
    module-config: "iterator"
    do-not-query-localhost: no
    qname-minimisation: no
    incoming-num-tcp: 64
    msg-cache-size: 16m
    rrset-cache-size: 32m
`, port, port, e.dir)
		if e.unboundRcvbuf != "" {
			fmt.Fprintf(&u, "    so-rcvbuf: %s\n", e.unboundRcvbuf)
		}
		if sc.transport == "dot" {
			fmt.Fprintf(&u, "    interface: 127.0.0.1@%d\n    tls-port: %d\n    tls-service-key: %q\n    tls-service-pem: %q\n", tlsPort, tlsPort, e.key, e.cert)
		}
		if sc.name == "forward" {
			fmt.Fprintf(&u, "forward-zone:\n    name: \".\"\n    forward-addr: 127.0.0.1@%d\n", sc.upstream)
		} else {
			fmt.Fprintf(&u, "    include: %q\n", path("unbound-local.conf"))
		}
		u.WriteString("remote-control:\n    control-enable: no\n")
		return []string{e.unbound, "-d", "-c", conf}, write(u.String())

	case "coredns":
		var c strings.Builder
		switch sc.name {
		case "forward":
			fmt.Fprintf(&c, ".:%d {\n    bind 127.0.0.1\n    cache {\n        success 20000\n        denial 20000\n    }\n    forward . 127.0.0.1:%d\n}\n", port, sc.upstream)
		case "etcd":
			fmt.Fprintf(&c, "example.internal:%d {\n    bind 127.0.0.1\n    cache {\n        success 20000\n        denial 20000\n    }\n    etcd example.internal {\n        endpoint http://127.0.0.1:%d\n        path /skydns\n    }\n}\n", port, sc.etcd)
		case "kubernetes":
			fmt.Fprintf(&c, "cluster.local:%d {\n    bind 127.0.0.1\n    kubernetes cluster.local {\n        kubeconfig %s test\n    }\n}\n", port, sc.kubeconfig)
		case "nxdomain", "file":
			// CoreDNS's hosts plugin answers SERVFAIL for a name it does not
			// hold (it has no SOA to say NXDOMAIN with): the zone file does.
			fmt.Fprintf(&c, "example.internal:%d {\n    bind 127.0.0.1\n    file %s\n}\n", port, path("example.internal.zone"))
		case "dot":
			fmt.Fprintf(&c, "tls://example.internal:%d {\n    bind 127.0.0.1\n    tls %s %s\n    hosts %s\n}\n", tlsPort, e.cert, e.key, path("hosts"))
		default:
			fmt.Fprintf(&c, "example.internal:%d {\n    bind 127.0.0.1\n    hosts %s\n}\n", port, path("hosts"))
		}
		return []string{e.coredns, "-quiet", "-conf", conf}, write(c.String())

	case "dnsmasq":
		argv := []string{e.dnsmasq, "--keep-in-foreground", "--conf-file=/dev/null", "--port=" + strconv.Itoa(port),
			"--listen-address=127.0.0.1", "--bind-interfaces", "--no-hosts", "--no-resolv", "--user=root", "--group=root",
			"--pid-file=" + path("dnsmasq.pid")}
		if sc.name == "forward" {
			return append(argv, fmt.Sprintf("--server=127.0.0.1#%d", sc.upstream), "--cache-size=20000"), nil
		}
		return append(argv, "--addn-hosts="+path("hosts"), "--local=/example.internal/"), nil
	}
	return nil, fmt.Errorf("no server %q", srv)
}

// client returns a DNS client for sc's transport.
func client(sc *scenario) *dns.Client {
	c := &dns.Client{Net: sc.transport, Timeout: time.Second}
	if sc.transport == "dot" {
		c.Net = "tcp-tls"
		c.TLSConfig = &tls.Config{InsecureSkipVerify: true}
	}
	return c
}

// expected is the address srv answers for name number i in sc; "" for
// any (a service's cluster IP is the API server's choice).
func expected(sc *scenario, srv string, i int) string {
	switch {
	case srv == "reference" || sc.name == "forward":
		return referenceIP
	case sc.name == "kubernetes":
		return ""
	}
	return hostIP(i)
}

func queryName(sc *scenario, i int) string {
	switch sc.name {
	case "forward":
		return fmt.Sprintf("name%d.example.com.", i)
	case "kubernetes":
		return k8sName(i)
	}
	return hostName(i)
}

// readyPoll is how often waitReady asks. It was 2 ms (2.4 ms between
// questions on this VM): a server's start read up to that late.
const readyPoll = 500 * time.Microsecond

// waitReady asks for one name until srv answers it right (etcd and
// kubernetes sources sync first), for up to timeout. It asks every
// readyPoll: the start's figure is late by half of that on average.
func waitReady(sc *scenario, srv string, port int, timeout time.Duration) error {
	var err error
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(readyPoll) {
		if err = checkName(sc, srv, port, 7, dns.RcodeSuccess); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s not ready after %s: %v", srv, timeout, err)
}

// checkAnswers asks for a few names and, where the scenario has them, a
// missing one, and says what is wrong.
func checkAnswers(sc *scenario, srv string, port int) error {
	for _, i := range []int{0, 1234, names - 1} {
		if err := checkName(sc, srv, port, i, dns.RcodeSuccess); err != nil {
			return err
		}
	}
	if sc.nxShare > 0 && srv != "reference" {
		if err := checkName(sc, srv, port, -1, dns.RcodeNameError); err != nil {
			return err
		}
	}
	return nil
}

// checkName asks for name i (-1: a missing one) and checks the rcode and,
// for NOERROR, the one address.
func checkName(sc *scenario, srv string, port, i, rcode int) error {
	name := "missing4.example.internal."
	if i >= 0 {
		name = queryName(sc, i)
	}
	m := new(dns.Msg).SetQuestion(name, dns.TypeA)
	r, _, err := client(sc).Exchange(m, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%s A: %v", name, err)
	}
	if r.Rcode != rcode {
		return fmt.Errorf("%s A: %s, want %s", name, dns.RcodeToString[r.Rcode], dns.RcodeToString[rcode])
	}
	if rcode != dns.RcodeSuccess {
		return nil
	}
	want := expected(sc, srv, i)
	if len(r.Answer) != 1 {
		return fmt.Errorf("%s A: %d answers, want %s", name, len(r.Answer), want)
	}
	if a, ok := r.Answer[0].(*dns.A); !ok || (want != "" && a.A.String() != want) {
		return fmt.Errorf("%s A: %s, want %s", name, r.Answer[0], want)
	}
	return nil
}

// checkRcodes says whether the rcodes of a dnsperf run are the scenario's:
// NXDOMAIN for its share of the queries (none for the reference), NOERROR
// for the rest, within 1 %.
func (s *scenario) checkRcodes(srv string, r perfResult) error {
	want := s.nxShare
	if srv == "reference" {
		want = 0
	}
	total := float64(r.Completed)
	nx := float64(r.Rcodes["NXDOMAIN"]) / total
	ok := float64(r.Rcodes["NOERROR"]) / total
	if nx < want-0.01 || nx > want+0.01 || ok < 1-want-0.01 {
		return fmt.Errorf("dnsperf: response codes %v of %d, want %.0f %% NXDOMAIN and the rest NOERROR", r.Rcodes, r.Completed, want*100)
	}
	return nil
}

// warmStream asks every query of sc twice (the whole set, then again),
// one after the other, over one connection of its transport (TCP or DoT),
// with EDNS as dnsperf asks them: the warm-up the UDP scenarios get from
// the load generator (a second of saturation and until every name was
// answered twice), so that a server's settled memory is taken after it has seen
// the names — and kept the answers it keeps only for a name asked again,
// as dnsd does.
func warmStream(sc *scenario, port int) error {
	data, err := os.ReadFile(sc.queries)
	if err != nil {
		return err
	}
	c := client(sc)
	conn, err := c.Dial(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("warm-up: %v", err)
	}
	defer conn.Close()
	var qs []*dns.Msg
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) >= 2 {
			m := new(dns.Msg).SetQuestion(dns.Fqdn(f[0]), dns.StringToType[f[1]])
			m.SetEdns0(dns.DefaultMsgSize, false)
			qs = append(qs, m)
		}
	}
	for range 2 {
		for _, m := range qs {
			if _, _, err := c.ExchangeWithConn(m, conn); err != nil {
				return fmt.Errorf("warm-up %s: %v", m.Question[0].Name, err)
			}
		}
	}
	return nil
}
