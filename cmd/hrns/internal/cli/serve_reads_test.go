package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
)

// TestServeReadFlags checks the flags of hrns serve that bound one key's
// reads of events and long-polls: values within bounds are taken as
// given (0 leaves session.Options' and server.Options' defaults), and a
// negative, absurd or malformed one is a usage error (exit 2) naming the
// flag, before anything starts.
func TestServeReadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want readFlags // when err is ""
		err  string
	}{
		{"unset", nil, readFlags{}, ""},
		{"zero means the defaults", []string{"--max-reads-per-key", "0", "--max-reads", "0", "--max-read-queue-per-key", "0", "--max-read-wait", "0", "--max-long-polls-per-key", "0"}, readFlags{}, ""},
		{"valid", []string{"--max-reads-per-key", "8", "--max-reads", "32", "--max-read-queue-per-key", "100", "--max-read-wait", "5s", "--max-long-polls-per-key", "64"},
			readFlags{perKey: 8, total: 32, queue: 100, wait: 5 * time.Second, longPolls: 64}, ""},
		{"per key up to the default total", []string{"--max-reads-per-key", "16"}, readFlags{perKey: 16}, ""},
		{"total below the default per key", []string{"--max-reads", "2", "--max-reads-per-key", "1"}, readFlags{perKey: 1, total: 2}, ""},
		{"largest", []string{"--max-reads-per-key", "4096", "--max-reads", "4096", "--max-read-queue-per-key", "65536", "--max-read-wait", "10m", "--max-long-polls-per-key", "65536", "--max-read-queue", "262144", "--max-long-polls", "262144"},
			readFlags{perKey: 4096, total: 4096, queue: 65536, wait: 10 * time.Minute, longPolls: 65536, queueTotal: 262144, longPollsTotal: 262144}, ""},
		{"totals", []string{"--max-read-queue", "100", "--max-read-queue-per-key", "10", "--max-long-polls", "50", "--max-long-polls-per-key", "5"},
			readFlags{queue: 10, queueTotal: 100, longPolls: 5, longPollsTotal: 50}, ""},
		{"per-key queue up to the default total", []string{"--max-read-queue-per-key", "8192", "--max-long-polls-per-key", "16384"}, readFlags{queue: 8192, longPolls: 16384}, ""},
		{"negative read queue", []string{"--max-read-queue", "-1"}, readFlags{}, "--max-read-queue -1: want a number from 1 to 262144"},
		{"negative long-polls in all", []string{"--max-long-polls", "-1"}, readFlags{}, "--max-long-polls -1: want a number from 1 to 262144"},
		{"absurd read queue", []string{"--max-read-queue", "262145"}, readFlags{}, "--max-read-queue 262145"},
		{"absurd long-polls in all", []string{"--max-long-polls", "10000000"}, readFlags{}, "--max-long-polls 10000000"},
		{"per-key queue above the default total", []string{"--max-read-queue-per-key", "8193"}, readFlags{}, "--max-read-queue-per-key 8193 is more than --max-read-queue 8192"},
		{"per-key queue above a given total", []string{"--max-read-queue", "100"}, readFlags{}, "--max-read-queue-per-key 1024 is more than --max-read-queue 100"},
		{"per-key long-polls above the default total", []string{"--max-long-polls-per-key", "16385"}, readFlags{}, "--max-long-polls-per-key 16385 is more than --max-long-polls 16384"},
		{"per-key long-polls above a given total", []string{"--max-long-polls", "10", "--max-long-polls-per-key", "11"}, readFlags{}, "--max-long-polls-per-key 11 is more than --max-long-polls 10"},
		{"negative reads per key", []string{"--max-reads-per-key", "-1"}, readFlags{}, "--max-reads-per-key -1: want a number from 1 to 4096, or 0 for the default"},
		{"negative reads", []string{"--max-reads", "-3"}, readFlags{}, "--max-reads -3"},
		{"negative queue", []string{"--max-read-queue-per-key", "-1"}, readFlags{}, "--max-read-queue-per-key -1"},
		{"negative long-polls", []string{"--max-long-polls-per-key", "-1"}, readFlags{}, "--max-long-polls-per-key -1: want a number from 1 to 65536"},
		{"negative wait", []string{"--max-read-wait", "-1s"}, readFlags{}, "--max-read-wait -1s: want a positive duration up to 10m0s"},
		{"absurd reads", []string{"--max-reads", "1000000"}, readFlags{}, "--max-reads 1000000"},
		{"absurd long-polls", []string{"--max-long-polls-per-key", "10000000"}, readFlags{}, "--max-long-polls-per-key 10000000"},
		{"absurd queue", []string{"--max-read-queue-per-key", "65537"}, readFlags{}, "--max-read-queue-per-key 65537"},
		{"absurd wait", []string{"--max-read-wait", "24h"}, readFlags{}, "--max-read-wait 24h0m0s"},
		{"per key above the total", []string{"--max-reads-per-key", "32"}, readFlags{}, "--max-reads-per-key 32 is more than --max-reads 16"},
		{"per key above a given total", []string{"--max-reads-per-key", "8", "--max-reads", "4"}, readFlags{}, "--max-reads-per-key 8 is more than --max-reads 4"},
		{"non-numeric", []string{"--max-long-polls-per-key", "many"}, readFlags{}, `invalid value "many" for flag -max-long-polls-per-key`},
		{"out of int range", []string{"--max-reads", "99999999999999999999"}, readFlags{}, "-max-reads: value out of range"},
		{"duration without a unit", []string{"--max-read-wait", "30"}, readFlags{}, `invalid value "30" for flag -max-read-wait`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o serveOptions
			fs := flag.NewFlagSet("hrns serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o.flags(fs)
			err := fs.Parse(tt.args)
			if err == nil {
				err = o.Validate()
			}
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if o.reads != tt.want {
					t.Errorf("got %+v, want %+v", o.reads, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
			// As hrns serve: exit 2, the error on standard error.
			var stderr bytes.Buffer
			env := map[string]string{"HOME": t.TempDir()}
			code := Run(t.Context(), append([]string{"serve", "--db", "sqlite:" + filepath.Join(t.TempDir(), "h.db")}, tt.args...),
				&IO{Out: io.Discard, Err: &stderr, Getenv: func(k string) string { return env[k] }})
			if code != ExitUsage || !strings.Contains(stderr.String(), tt.err) {
				t.Errorf("hrns serve: exit %d, stderr %q; want %d and %q", code, stderr.String(), ExitUsage, tt.err)
			}
		})
	}
}

// TestServeReadFlagsSet: the flags reach the session manager's and the
// server's options, each to its own field.
func TestServeReadFlagsSet(t *testing.T) {
	r := readFlags{perKey: 1, total: 2, queue: 3, queueTotal: 4, wait: 5 * time.Second, longPolls: 6, longPollsTotal: 7}
	var so session.Options
	r.setSession(&so)
	if so.MaxReadsPerOwner != 1 || so.MaxReads != 2 || so.MaxReadQueue != 3 || so.MaxReadQueueTotal != 4 || so.MaxReadWait != 5*time.Second {
		t.Errorf("session options: %+v", so)
	}
	var sv server.Options
	r.setServer(&sv)
	if sv.MaxLongPollsPerKey != 6 || sv.MaxLongPolls != 7 {
		t.Errorf("server options: MaxLongPollsPerKey %d, MaxLongPolls %d", sv.MaxLongPollsPerKey, sv.MaxLongPolls)
	}
}

// TestServeMaxLongPollsPerKey runs hrns serve --max-long-polls-per-key 1:
// while one long-poll of a key waits, the key's second is 429 with
// Retry-After and "Hrns-Quota: long-polls", and another key's long-poll
// is served. (The default bound is 1,024.)
func TestServeMaxLongPollsPerKey(t *testing.T) {
	model := openaitest.NewServer(openaitest.Reply{Text: "a"}, openaitest.Reply{Text: "b"})
	defer model.Close()
	const keyA, keyB = "sk-polls-a", "sk-polls-b"
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": keyA + "," + keyB},
		"--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"), "--max-long-polls-per-key", "1")

	// A completed session of each key, and its long-poll past its end,
	// which waits for an event that does not come.
	get := func(ctx context.Context, key, path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		return http.DefaultClient.Do(req)
	}
	changes := func(key string) string {
		res, err := client.New(s.url, key, nil).RunSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "a"}}, Messages: client.Text("go")})
		if err != nil || res.Status != session.StatusCompleted {
			t.Fatalf("%s: %v %+v", key, err, res)
		}
		path := "/api/v2/sessions/" + res.SessionID + "/changes?include_events=false"
		resp, err := get(t.Context(), key, path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		end := resp.Header.Get("ETag") // the event count
		if resp.StatusCode != http.StatusOK || end == "" {
			t.Fatalf("%s: changes %d, ETag %q", key, resp.StatusCode, end)
		}
		return path + "&from_index=" + end
	}
	pathA, pathB := changes(keyA), changes(keyB)

	// The first long-poll of A waits 25s, asked again until it holds
	// the key's slot (the probes below may hold it for a moment).
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			resp, err := get(ctx, keyA, pathA+"&wait_for_seconds=25")
			if err != nil {
				return
			}
			resp.Body.Close()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { cancel(); <-done }()
	var refused *http.Response
	for range 500 {
		resp, err := get(t.Context(), keyA, pathA+"&wait_for_seconds=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			refused = resp
			break
		}
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent { // served: waited, nothing new
			t.Fatalf("a second long-poll of A: %d", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond) // the first one's turn
	}
	if refused == nil {
		t.Fatal("no second long-poll of A was refused while the first waited")
	}
	if refused.Header.Get("Hrns-Quota") != "long-polls" || refused.Header.Get("Retry-After") == "" {
		t.Errorf("the second long-poll of A: 429 with Hrns-Quota %q, Retry-After %q; want long-polls and a delay",
			refused.Header.Get("Hrns-Quota"), refused.Header.Get("Retry-After"))
	}
	// Another key's long-poll waits its second and is answered; A's
	// reads that do not wait are served.
	for _, tc := range []struct{ key, path string }{{keyB, pathB + "&wait_for_seconds=1"}, {keyA, pathA}} {
		resp, err := get(t.Context(), tc.key, tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
			t.Errorf("GET %s as %s while A's long-poll waits: %d, want it served (200, or 204: nothing new)", tc.path, tc.key, resp.StatusCode)
		}
	}
}
