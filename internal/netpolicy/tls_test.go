package netpolicy_test

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/internal/netpolicy/netpolicytest"
)

// TestDescribeTLS: the failures of real TLS handshakes on loopback are
// described in fixed words, without the names the server's certificate
// holds (an x509 error lists them), and Describe says the same.
func TestDescribeTLS(t *testing.T) {
	srv := netpolicytest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	port := srv.Listener.Addr().String()[strings.LastIndex(srv.Listener.Addr().String(), ":")+1:]
	client := func(c *tls.Config) *http.Client { return &http.Client{Transport: &http.Transport{TLSClientConfig: c}} }
	trusting := client(&tls.Config{RootCAs: netpolicytest.Pool(t)})
	for _, tt := range []struct {
		name   string
		client *http.Client
		url    string
		want   string
	}{
		{"the certificate names other hosts", trusting, fmt.Sprintf("https://localhost:%s/", port), netpolicy.TLSWrongName},
		{"the certificate names other addresses", trusting, srv.URL, netpolicy.TLSWrongName},
		// The system's roots, which do not hold the test CA, for the
		// name the certificate is valid for (the name is checked first).
		{"the certificate's authority is unknown", client(&tls.Config{ServerName: netpolicytest.SecretName}), srv.URL, netpolicy.TLSUntrusted},
		{"the handshake fails", client(&tls.Config{RootCAs: netpolicytest.Pool(t), ServerName: netpolicytest.SecretName, MaxVersion: tls.VersionTLS10}), srv.URL, netpolicy.TLSHandshake},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := tt.client.Get(tt.url)
			if err == nil {
				resp.Body.Close()
				t.Fatal("no error")
			}
			text, ok := netpolicy.DescribeTLS(err)
			if !ok || text != tt.want {
				t.Errorf("DescribeTLS(%q) = %q, %v; want %q", err, text, ok, tt.want)
			}
			if d, ok := netpolicy.Describe(err); !ok || d != tt.want {
				t.Errorf("Describe(%q) = %q, %v; want %q", err, d, ok, tt.want)
			}
		})
	}
	// What DescribeTLS is not about.
	for _, err := range []error{fmt.Errorf("the server answered 500"), &netpolicy.BlockedError{Reason: "a private address"}} {
		if text, ok := netpolicy.DescribeTLS(err); ok {
			t.Errorf("DescribeTLS(%q) = %q, true", err, text)
		}
	}
}
