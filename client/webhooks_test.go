package client_test

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/platform/webhook"
)

// signed returns the headers of a delivery of body signed with secrets at
// t, as the server makes them.
func signed(t *testing.T, id string, at time.Time, body []byte, secrets ...string) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	for _, s := range secrets {
		sig, err := webhook.Sign(s, id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		if v := h.Get("webhook-signature"); v != "" {
			sig = v + " " + sig
		}
		h.Set("webhook-signature", sig)
	}
	return h
}

// hSigned returns H's headers of a delivery of body signed with secret at
// t, as the server makes them.
func hSigned(at time.Time, body []byte, secret string) http.Header {
	h := http.Header{}
	h.Set(client.HTimestampHeader, strconv.FormatInt(at.Unix(), 10))
	h.Set(client.HSignatureHeader, webhook.SignH(secret, at, body))
	return h
}

func TestVerifyWebhook(t *testing.T) {
	now := time.Unix(1767225600, 0)
	secret, other := webhook.NewSecret(), webhook.NewSecret()
	body := []byte(`{"id":"e1","type":"session.completed"}`)
	for _, tc := range []struct {
		name    string
		header  http.Header
		body    []byte
		secrets []string
		want    error
	}{
		{"valid", signed(t, "e1", now, body, secret), body, []string{secret}, nil},
		{"one of two signatures", signed(t, "e1", now, body, other, secret), body, []string{secret}, nil},
		{"one of two secrets", signed(t, "e1", now, body, secret), body, []string{other, secret}, nil},
		{"tampered body", signed(t, "e1", now, body, secret), []byte(`{"id":"e1","type":"session.failed"}`), []string{secret}, client.ErrWebhookSignature},
		{"wrong secret", signed(t, "e1", now, body, other), body, []string{secret}, client.ErrWebhookSignature},
		{"other id", func() http.Header { h := signed(t, "e1", now, body, secret); h.Set("webhook-id", "e2"); return h }(), body, []string{secret}, client.ErrWebhookSignature},
		{"old", signed(t, "e1", now.Add(-6*time.Minute), body, secret), body, []string{secret}, client.ErrWebhookTimestamp},
		{"future", signed(t, "e1", now.Add(6*time.Minute), body, secret), body, []string{secret}, client.ErrWebhookTimestamp},
		{"no headers", http.Header{}, body, []string{secret}, client.ErrWebhookSignature},
		{"H: valid", hSigned(now, body, secret), body, []string{secret}, nil},
		{"H: one of two secrets", hSigned(now, body, secret), body, []string{other, secret}, nil},
		{"H: tampered body", hSigned(now, body, secret), []byte(`{"id":"e1","type":"session.failed"}`), []string{secret}, client.ErrWebhookSignature},
		{"H: wrong secret", hSigned(now, body, other), body, []string{secret}, client.ErrWebhookSignature},
		{"H: old", hSigned(now.Add(-6*time.Minute), body, secret), body, []string{secret}, client.ErrWebhookTimestamp},
		{"H: other timestamp", func() http.Header {
			h := hSigned(now, body, secret)
			h.Set(client.HTimestampHeader, strconv.FormatInt(now.Unix()+1, 10))
			return h
		}(), body, []string{secret}, client.ErrWebhookSignature},
		{"H: no id in the body", hSigned(now, []byte(`{}`), secret), []byte(`{}`), []string{secret}, client.ErrWebhookSignature},
		{"garbage signature", func() http.Header {
			h := signed(t, "e1", now, body, secret)
			h.Set("webhook-signature", "v1,@@@ v2,abc nocomma")
			return h
		}(), body, []string{secret}, client.ErrWebhookSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := client.VerifyWebhook(tc.header, tc.body, &client.VerifyOptions{Now: now}, tc.secrets...)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("VerifyWebhook = %q, %v; want %v", id, err, tc.want)
			}
			if err == nil && id != "e1" {
				t.Errorf("id = %q", id)
			}
		})
	}
	if _, err := client.VerifyWebhook(signed(t, "e1", now, body, secret), body, &client.VerifyOptions{Now: now}, "not-a-secret"); err == nil {
		t.Error("a malformed secret verified")
	}
}

// FuzzVerifyWebhook feeds the verifier headers an attacker chooses: it
// never panics, and accepts only the signature made with the secret.
func FuzzVerifyWebhook(f *testing.F) {
	secret := "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := time.Unix(1767225600, 0)
	f.Add("e1", "1767225600", "v1,abc", []byte(`{}`))
	f.Add("e1", "-1", "v1,", []byte(``))
	f.Add("", "99999999999999999999", "v1,a v1,b v1,c", []byte(`x`))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		got, err := client.VerifyWebhook(h, body, &client.VerifyOptions{Now: now}, secret)
		if err != nil {
			return
		}
		sec, _ := strconv.ParseInt(ts, 10, 64)
		want, _ := webhook.Sign(secret, id, time.Unix(sec, 0), body)
		if got != id || !slices.Contains(strings.Fields(sig), want) {
			t.Errorf("accepted id %q signature %q; the valid one is %q", id, sig, want)
		}
	})
}
