package webhook_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/session/webhook"
)

// standardReceiver starts testdata/receiver/receiver.js, a receiver that
// verifies deliveries with the Standard Webhooks reference library
// (npm standardwebhooks, pinned in its package-lock.json and installed by
// .ci/setup-npm), against each of secrets. It returns the receiver's URL
// and its verdicts, one per request, in arrival order.
func standardReceiver(t *testing.T, secrets ...string) (string, <-chan verdict) {
	t.Helper()
	dir := filepath.Join("testdata", "receiver")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Standard Webhooks library is not installed (%v): .ci/setup-npm installs it", err)
		}
		t.Skip("the Standard Webhooks library is not installed: run .ci/setup-npm")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not in PATH")
	}
	cmd := exec.Command(node, append([]string{"receiver.js"}, secrets...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("the receiver printed no port: %v", lines.Err())
	}
	var hello struct{ Port int }
	if err := json.Unmarshal(lines.Bytes(), &hello); err != nil || hello.Port == 0 {
		t.Fatalf("the receiver's first line %q: %v", lines.Text(), err)
	}
	verdicts := make(chan verdict, 100)
	go func() {
		defer close(verdicts)
		for lines.Scan() {
			var v verdict
			if err := json.Unmarshal(lines.Bytes(), &v); err != nil {
				t.Errorf("receiver line %q: %v", lines.Text(), err)
				return
			}
			verdicts <- v
		}
	}()
	return "http://127.0.0.1:" + strconv.Itoa(hello.Port) + "/hook", verdicts
}

// verdict is the receiver's judgement of one request.
type verdict struct {
	ID       string   `json:"id"`
	Verified []bool   `json:"verified"`
	Errors   []string `json:"errors"`
}

func next(t *testing.T, verdicts <-chan verdict) verdict {
	t.Helper()
	select {
	case v, ok := <-verdicts:
		if !ok {
			t.Fatal("the receiver stopped")
		}
		return v
	case <-time.After(time.Minute): // a bound on a hang, not a timing assertion
		t.Fatal("no request reached the receiver")
	}
	return verdict{}
}

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
	url, verdicts := standardReceiver(t, w.Secret, other)
	if _, err := svc.Update(t.Context(), "alice", w.ID, &webhook.UpdateParams{URL: &url}); err != nil {
		t.Fatal(err)
	}
	complete(t, st, "alice", "s1")
	if n := deliverDue(t, svc); n != 1 {
		t.Fatalf("attempted %d deliveries, want 1", n)
	}
	v := next(t, verdicts)
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
	url2, verdicts2 := standardReceiver(t, rotated.Secret, w.Secret)
	if _, err := svc.Update(t.Context(), "alice", w.ID, &webhook.UpdateParams{URL: &url2}); err != nil {
		t.Fatal(err)
	}
	complete(t, st, "alice", "s2")
	deliverDue(t, svc)
	v = next(t, verdicts2)
	if !v.Verified[0] || !v.Verified[1] {
		t.Errorf("during the overlap the reference library verified %v with (new, old): %q", v.Verified, v.Errors)
	}
}
