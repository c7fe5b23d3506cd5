// Package webhooktest runs webhook receivers written with code hrns did not
// write, for the tests of hrns's deliveries: the Standard Webhooks
// reference library (npm standardwebhooks, pinned by
// platform/webhook/testdata/receiver/package-lock.json and installed by
// .ci/setup-npm).
package webhooktest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// A Verdict is the reference library's judgement of one request:
// Verified and Errors hold one entry per secret the receiver was given,
// in order.
type Verdict struct {
	ID       string   `json:"id"`
	Verified []bool   `json:"verified"`
	Errors   []string `json:"errors"`
}

// A Receiver is testdata/receiver/receiver.js running on loopback: it
// verifies every request it gets with the Standard Webhooks library
// against each of its secrets, and answers 204 when the first verifies,
// 401 otherwise.
type Receiver struct {
	// URL receives deliveries (any path).
	URL      string
	verdicts chan Verdict
}

// StandardReceiver starts a [Receiver] with secrets, stopped when t ends.
// It skips t when the library is not installed (and fails it under CI,
// where .ci/setup-npm must have run), or when node is not in PATH.
func StandardReceiver(t testing.TB, secrets ...string) *Receiver {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "testdata", "receiver")
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
	r := &Receiver{URL: "http://127.0.0.1:" + strconv.Itoa(hello.Port) + "/hook", verdicts: make(chan Verdict, 100)}
	go func() {
		defer close(r.verdicts)
		for lines.Scan() {
			var v Verdict
			if err := json.Unmarshal(lines.Bytes(), &v); err != nil {
				t.Errorf("receiver line %q: %v", lines.Text(), err)
				return
			}
			r.verdicts <- v
		}
	}()
	return r
}

// Next returns the verdict on the next request the receiver got, in
// arrival order. The wait is bounded (a minute) only so that a broken
// test fails instead of hanging.
func (r *Receiver) Next(t testing.TB) Verdict {
	t.Helper()
	select {
	case v, ok := <-r.verdicts:
		if !ok {
			t.Fatal("the receiver stopped")
		}
		return v
	case <-time.After(time.Minute):
		t.Fatal("no request reached the receiver")
	}
	return Verdict{}
}
