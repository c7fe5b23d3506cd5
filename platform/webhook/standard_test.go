package webhook_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/platform/webhook/webhooktest"
)

// TestStandardWebhooksLibrary checks hrns's signatures with code hrns did
// not write: the Standard Webhooks reference library verifies a delivery
// with the webhook's secret, refuses it with another, and during a
// rotation's overlap accepts it with the old secret and the new one.
func TestStandardWebhooksLibrary(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	svc := newService(st, c, &webhook.Options{RotationOverlap: time.Hour})
	other := webhook.NewSecret()

	// Create the webhook first with a placeholder URL to learn its secret,
	// then point it at a receiver that knows the secret.
	w := create(t, svc, "alice", "http://127.0.0.1:9/placeholder", completedOnly())
	rc := webhooktest.StandardReceiver(t, w.Secret, other)
	url := rc.URL
	if _, err := svc.Update(t.Context(), "alice", w.ID, &webhook.UpdateParams{URL: &url}); err != nil {
		t.Fatal(err)
	}
	complete(t, st, "alice", "s1")
	if n := deliverDue(t, svc); n != 1 {
		t.Fatalf("attempted %d deliveries, want 1", n)
	}
	v := rc.Next(t)
	if !v.Verified[0] {
		t.Errorf("the reference library refused the delivery: %s", v.Errors[0])
	}
	if v.Verified[1] {
		t.Error("the reference library accepted the delivery with another secret")
	}

	// Rotate: during the overlap the delivery verifies with both secrets.
	rotated, err := svc.Rotate(t.Context(), "alice", w.ID)
	if err != nil {
		t.Fatal(err)
	}
	rc2 := webhooktest.StandardReceiver(t, rotated.Secret, w.Secret)
	url2 := rc2.URL
	if _, err := svc.Update(t.Context(), "alice", w.ID, &webhook.UpdateParams{URL: &url2}); err != nil {
		t.Fatal(err)
	}
	complete(t, st, "alice", "s2")
	deliverDue(t, svc)
	v = rc2.Next(t)
	if !v.Verified[0] || !v.Verified[1] {
		t.Errorf("during the overlap the reference library verified %v with (new, old): %q", v.Verified, v.Errors)
	}
}
