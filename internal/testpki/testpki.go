package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Cert    *x509.Certificate // set by NewCA, never nil
	CertPEM []byte            // Cert in PEM; set by NewCA, never empty
	key     *ecdsa.PrivateKey
	serial  atomic.Int64
}

// Leaf is a certificate issued by a CA, with its key.
type Leaf struct {
	CertPEM []byte          // the certificate in PEM; never empty
	KeyPEM  []byte          // the private key in PEM; never empty
	TLS     tls.Certificate // the same pair for a tls.Config; never zero
}

// NewCA creates a certificate authority named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, CertPEM: encode("CERTIFICATE", der), key: key}
	ca.serial.Store(1)
	return ca
}

// Pool is a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue makes a certificate for cn with the given usage (server or client
// auth), valid for hosts: each an IP address or a DNS name.
func (ca *CA) Issue(t testing.TB, cn string, usage x509.ExtKeyUsage, hosts ...string) Leaf {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Leaf{
		CertPEM: encode("CERTIFICATE", der),
		KeyPEM:  encode("EC PRIVATE KEY", kb),
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

// Server issues a server certificate for hosts from a new CA and returns
// both: the common case of one TLS listener under test.
func Server(t testing.TB, hosts ...string) (*CA, Leaf) {
	t.Helper()
	ca := NewCA(t, "dnsd test CA")
	return ca, ca.Issue(t, hosts[0], x509.ExtKeyUsageServerAuth, hosts...)
}

// WriteFile writes PEM data to path (mode 0600), failing the test on error.
func WriteFile(t testing.TB, path string, pemData []byte) {
	t.Helper()
	if err := os.WriteFile(path, pemData, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func encode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
