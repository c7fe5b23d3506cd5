package server_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/platform/webhook/webhooktest"
	"github.com/hrns-dev/hrns/session"
)

// hEvent is the body of a delivery as H's SDK parses it
// ({type, id, created_at, data: {session_id, status, previous_status}}).
type hEvent struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CreatedAt string `json:"created_at"`
	Data      struct {
		SessionID      string  `json:"session_id"`
		Status         string  `json:"status"`
		PreviousStatus *string `json:"previous_status"`
	} `json:"data"`
}

var (
	errHSignature = errors.New("signature mismatch")
	errHOld       = errors.New("delivery older than the tolerance")
)

// hVerify is H's scheme written from its description, not from hrns's
// code: X-H-Webhook-Timestamp is Unix seconds, no further than 300 s from
// now; X-H-Webhook-Signature is "sha256=" and the hex HMAC-SHA256, keyed
// with the bytes of one of the secrets as given, of the timestamp, a dot
// and the raw body; the body parses as hEvent.
func hVerify(header http.Header, body []byte, now time.Time, secrets ...string) (*hEvent, error) {
	ts := header.Get("X-H-Webhook-Timestamp")
	sent, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("invalid timestamp header %q", ts)
	}
	if math.Abs(float64(now.Unix()-sent)) > 300 {
		return nil, errHOld
	}
	matched := false
	for _, s := range secrets {
		mac := hmac.New(sha256.New, []byte(s))
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		matched = hmac.Equal([]byte("sha256="+hex.EncodeToString(mac.Sum(nil))), []byte(header.Get("X-H-Webhook-Signature"))) || matched
	}
	if !matched {
		return nil, errHSignature
	}
	var e hEvent
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&e); err != nil || e.Type == "" || e.ID == "" || e.CreatedAt == "" {
		return nil, fmt.Errorf("unparsable payload %s: %v", body, err)
	}
	return &e, nil
}

// captured is a request a webhook receiver got.
type captured struct {
	header http.Header
	body   []byte
}

// newCapture returns a receiver that keeps what it gets and answers 204.
func newCapture(t *testing.T) (*httptest.Server, <-chan captured) {
	got := make(chan captured, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- captured{r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func nextCaptured(t *testing.T, got <-chan captured) captured {
	t.Helper()
	select {
	case c := <-got:
		return c
	case <-time.After(30 * time.Second): // a bound on a hang, not a timing assertion
		t.Fatal("no webhook request")
		return captured{}
	}
}

// forward sends what a receiver got, with body, to the Standard Webhooks
// receiver, and returns its verdict.
func forward(t *testing.T, std *webhooktest.Receiver, c captured, body []byte) webhooktest.Verdict {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", std.URL, bytes.NewReader(body))
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return std.Next(t)
}

// TestWebhookSignaturesHAndStandard: a delivery of hrns serve is verified
// both by H's scheme (X-H-Webhook-* headers, the body H's SDK parses) and
// by the Standard Webhooks reference library, from one secret; a wrong
// secret, a changed body and an old timestamp are refused by both; during
// a rotation's overlap both verify with the old secret (issue 33, defect
// 1).
func TestWebhookSignaturesHAndStandard(t *testing.T) {
	e, _ := newHookEnv(t, openaitest.Reply{Text: "done"})
	rcv, got := newCapture(t)
	var hook client.WebhookWithSecret
	e.expect(e.do("POST", "/api/v2/webhooks", keyAlice, map[string]any{"url": rcv.URL, "enabled_events": []string{"session.completed"}}),
		http.StatusCreated).json(&hook)
	wrong := webhook.NewSecret()
	std := webhooktest.StandardReceiver(t, hook.Secret, wrong)

	id := e.create(keyAlice, `{"agent":{"name":"x","environments":[]},"messages":"hi"}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	c := nextCaptured(t, got)
	now := time.Now()

	// H's scheme.
	ev, err := hVerify(c.header, c.body, now, hook.Secret)
	if err != nil {
		t.Fatalf("H's scheme refused the delivery: %v (headers %v)", err, c.header)
	}
	if created, err := time.Parse(time.RFC3339Nano, ev.CreatedAt); err != nil || ev.Type != "session.completed" || ev.Data.SessionID != id ||
		ev.Data.Status != "completed" || ev.Data.PreviousStatus == nil || *ev.Data.PreviousStatus != "running" || now.Sub(created) > time.Minute {
		t.Errorf("H's body: %+v (%s)", ev, c.body)
	}
	changed := bytes.Replace(c.body, []byte(`"status":"completed"`), []byte(`"status":"failed"`), 1)
	if bytes.Equal(changed, c.body) {
		t.Fatalf("no status to change in %s", c.body)
	}
	for name, tc := range map[string]struct {
		body   []byte
		secret string
	}{"wrong secret": {c.body, wrong}, "changed body": {changed, hook.Secret}} {
		if _, err := hVerify(c.header, tc.body, now, tc.secret); !errors.Is(err, errHSignature) {
			t.Errorf("H's scheme, %s: %v, want a signature mismatch", name, err)
		}
	}
	// The Standard Webhooks library, with the secret and a wrong one.
	if v := forward(t, std, c, c.body); !v.Verified[0] || v.Verified[1] {
		t.Errorf("Standard Webhooks verified %v with (secret, wrong one): %q", v.Verified, v.Errors)
	}
	if v := forward(t, std, c, changed); v.Verified[0] || v.Verified[1] {
		t.Errorf("Standard Webhooks verified a changed body: %v", v.Verified)
	}
	// client.VerifyWebhook verifies either scheme alone.
	hOnly := c.header.Clone()
	for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		hOnly.Del(k)
	}
	for name, h := range map[string]http.Header{"both": c.header, "H's headers": hOnly} {
		if got, err := client.VerifyWebhook(h, c.body, nil, hook.Secret); err != nil || got != ev.ID {
			t.Errorf("client.VerifyWebhook with %s = %q, %v; want %s", name, got, err, ev.ID)
		}
		if _, err := client.VerifyWebhook(h, changed, nil, hook.Secret); err == nil {
			t.Errorf("client.VerifyWebhook with %s accepted a changed body", name)
		}
	}

	// Rotation: during the overlap, H's header is signed with the
	// previous secret (receivers may pass both, as H's SDK takes a
	// list), the Standard header with both.
	var rotated client.WebhookWithSecret
	e.expect(e.do("POST", "/api/v2/webhooks/"+hook.ID+"/rotate", keyAlice, nil), http.StatusOK).json(&rotated)
	std2 := webhooktest.StandardReceiver(t, rotated.Secret, hook.Secret)
	e.expect(e.do("POST", "/api/v2/webhooks/"+hook.ID+"/ping", keyAlice, nil), http.StatusOK)
	c = nextCaptured(t, got)
	for _, secrets := range [][]string{{hook.Secret}, {rotated.Secret, hook.Secret}} {
		if _, err := hVerify(c.header, c.body, time.Now(), secrets...); err != nil {
			t.Errorf("H's scheme during the overlap with %d secrets: %v", len(secrets), err)
		}
	}
	if v := forward(t, std2, c, c.body); !v.Verified[0] || !v.Verified[1] {
		t.Errorf("Standard Webhooks during the overlap verified %v with (new, old): %q", v.Verified, v.Errors)
	}

	// An old timestamp: a server whose clock is ten minutes behind signs
	// a ping; both refuse it for its age alone.
	late, _ := newHookEnvWith(t, &webhook.Options{Now: func() time.Time { return time.Now().Add(-10 * time.Minute) }})
	rcv2, got2 := newCapture(t)
	var hook2 client.WebhookWithSecret
	late.expect(late.do("POST", "/api/v2/webhooks", keyAlice, map[string]any{"url": rcv2.URL}), http.StatusCreated).json(&hook2)
	std3 := webhooktest.StandardReceiver(t, hook2.Secret)
	late.expect(late.do("POST", "/api/v2/webhooks/"+hook2.ID+"/ping", keyAlice, nil), http.StatusOK)
	c = nextCaptured(t, got2)
	if _, err := hVerify(c.header, c.body, time.Now(), hook2.Secret); !errors.Is(err, errHOld) {
		t.Errorf("H's scheme, ten minutes old: %v, want refused as old", err)
	}
	if _, err := hVerify(c.header, c.body, time.Now().Add(-10*time.Minute), hook2.Secret); err != nil {
		t.Errorf("H's scheme at the signing time: %v", err)
	}
	if v := forward(t, std3, c, c.body); v.Verified[0] || !strings.Contains(strings.ToLower(v.Errors[0]), "timestamp") {
		t.Errorf("Standard Webhooks, ten minutes old: verified %v, %q", v.Verified, v.Errors)
	}
}
