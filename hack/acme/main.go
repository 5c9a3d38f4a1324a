// Command acme-dns01 obtains a certificate by ACME DNS-01 with lego's
// client and its RFC 2136 provider (dnsupdate), the way lego's own
// command line does: the challenge TXT record is written by a TSIG-signed
// dynamic update to the name server given, and the zone is found and the
// record's propagation checked through the resolver given. The end-to-end
// tests run it against Pebble (the ACME test server) and dnsd; it is not
// part of dnsd.
//
//	acme-dns01 -server https://127.0.0.1:14000/dir -ca pebble.minica.pem \
//	  -nameserver 127.0.0.1:5353 -key acme-key -secret BASE64 \
//	  -domain www.corp.internal -out DIR
package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-acme/lego/v5/acme"
	"github.com/go-acme/lego/v5/certcrypto"
	"github.com/go-acme/lego/v5/certificate"
	"github.com/go-acme/lego/v5/challenge/dns01"
	"github.com/go-acme/lego/v5/lego"
	"github.com/go-acme/lego/v5/providers/dns/dnsupdate"
	"github.com/go-acme/lego/v5/registration"
)

type user struct {
	key crypto.Signer
	reg *acme.ExtendedAccount
}

func (u *user) GetEmail() string                       { return "" }
func (u *user) GetRegistration() *acme.ExtendedAccount { return u.reg }
func (u *user) GetPrivateKey() crypto.Signer           { return u.key }

func main() {
	server := flag.String("server", "", "the ACME directory URL")
	caFile := flag.String("ca", "", "PEM file of the CA that signed the ACME server's TLS certificate")
	ns := flag.String("nameserver", "", "host:port of the name server that takes the updates and answers for the zone")
	key := flag.String("key", "", "TSIG key name")
	secret := flag.String("secret", "", "TSIG secret (base64)")
	alg := flag.String("algorithm", "hmac-sha256.", "TSIG algorithm")
	domain := flag.String("domain", "", "the certificate's name")
	out := flag.String("out", ".", "directory the certificate and its key are written to")
	timeout := flag.Duration("timeout", time.Minute, "how long to try")
	flag.Parse()
	if err := run(*server, *caFile, *ns, *key, *secret, *alg, *domain, *out, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "acme-dns01:", err)
		os.Exit(1)
	}
}

func run(server, caFile, ns, key, secret, alg, domain, out string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s: no certificate", caFile)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	u := &user{key: priv}
	cfg := lego.NewConfig(u)
	cfg.CADirURL = server
	cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	client, err := lego.NewClient(cfg)
	if err != nil {
		return fmt.Errorf("ACME client: %w", err)
	}

	// Zone lookups and the propagation check ask the name server itself:
	// it is the zone's only server (its NS records name port 53, which
	// the test's dnsd does not listen on).
	dns01.SetDefaultClient(dns01.NewClient(&dns01.Options{RecursiveNameservers: []string{ns}, Timeout: 5 * time.Second}))
	pc := dnsupdate.NewDefaultConfig()
	pc.Nameserver = ns
	pc.TSIGKey, pc.TSIGSecret, pc.TSIGAlgorithm = key, secret, alg
	pc.PropagationTimeout, pc.PollingInterval = 30*time.Second, 500*time.Millisecond
	provider, err := dnsupdate.NewDNSProviderConfig(pc)
	if err != nil {
		return err
	}
	if err := client.Challenge.SetDNS01Provider(provider, dns01.DisableAuthoritativeNssPropagationRequirement()); err != nil {
		return err
	}
	reg, err := client.Registration.Register(ctx, registration.RegisterOptions{TermsOfServiceAgreed: true})
	if err != nil {
		return fmt.Errorf("registering: %w", err)
	}
	u.reg = reg
	res, err := client.Certificate.Obtain(ctx, certificate.ObtainRequest{Domains: []string{domain}, Bundle: true, KeyType: certcrypto.EC256})
	if err != nil {
		return fmt.Errorf("obtaining a certificate for %s: %w", domain, err)
	}
	if err := os.WriteFile(filepath.Join(out, domain+".crt"), res.Certificate, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, domain+".key"), res.PrivateKey, 0o600)
}
