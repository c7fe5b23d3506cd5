// Package netpolicytest serves HTTPS on loopback with a certificate that
// names hosts a tenant must not learn, for the tests of what a TLS
// failure tells them (netpolicy.DescribeTLS), through the real paths:
// the system's roots, as a deployment has them.
//
//	func TestX(t *testing.T) {
//		if !netpolicytest.RunTrusted(t) {
//			return // the parent: the child ran the test
//		}
//		srv := netpolicytest.NewTLSServer(t, handler)
//		// https://localhost:PORT/ fails with "x509: certificate is
//		// valid for db.secret-corp.internal, not localhost".
//	}
package netpolicytest

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
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"
)

// What the certificate of NewTLSServer names, which no error a tenant
// reads may show.
const (
	SecretName = "db.secret-corp.internal"
	SecretIP   = "10.9.8.7"
	CAName     = "Secret Corp Internal CA"
)

// Secrets are the strings of the certificate that must not leak.
var Secrets = []string{SecretName, SecretIP, "secret-corp", CAName}

const childEnv = "HRNS_NETPOLICYTEST_CHILD"

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var ca = sync.OnceValues(func() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: CAName, Organization: []string{"Secret Corp"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
})

// Pool is a pool holding the test CA, for a client given its roots.
func Pool(t testing.TB) *x509.CertPool {
	a, err := ca()
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AddCert(a.cert)
	return p
}

// RunTrusted makes the test CA one of the system's roots for t: it runs
// t again, alone, in a child process of the test binary whose
// SSL_CERT_FILE is the CA (the system's roots are read once per process,
// so the parent's may already be loaded). In the parent it waits for the
// child, fails t with the child's output if the child failed, and
// returns false; in the child it returns true and the test goes on.
func RunTrusted(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	a, err := ca()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, a.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe, "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name(), "SSL_CERT_FILE="+file, "SSL_CERT_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test in a process that trusts the test CA: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^--- PASS: ` + regexp.QuoteMeta(t.Name()) + ` `).Match(out) {
		t.Fatalf("the child process did not run the test:\n%s", out)
	}
	return false
}

// NewTLSServer starts an HTTPS server on 127.0.0.1 whose certificate,
// signed by the test CA, is valid for SecretName and SecretIP only: a
// client that trusts the CA and reaches it as localhost or 127.0.0.1 fails
// with an x509 error naming them; one that does not trust the CA fails
// with an unknown authority.
func NewTLSServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	a, err := ca()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: SecretName, Organization: []string{"Secret Corp"}},
		DNSNames:     []string{SecretName},
		IPAddresses:  []net.IP{net.ParseIP(SecretIP)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}
