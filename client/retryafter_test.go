package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
)

// TestHostileRetryAfter: a server that paces every read with a
// Retry-After of a day or more (seconds, a number too large for any
// clock, a date in the year 9999), under a context without a deadline,
// has its 429 returned at once, its RetryAfter bounded (24 h), after
// one request; before, the SDK slept a day and more before asking
// again. The same for a 503 (retried within MaxAttempts). Garbage,
// negative and past values are no wait: the read is asked again and
// served.
func TestHostileRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		status     int
		quota, ra  string
		wantBusy   bool
		wantServed bool
	}{
		{429, "reads", "99999999999", true, false},
		{429, "long-polls", "1e400", true, false},
		{429, "reads", "Fri, 31 Dec 9999 23:59:59 GMT", true, false},
		{429, "reads", "86400", true, false},
		{503, "", "3600", false, false},
		{429, "reads", "-5", true, true},
		{429, "reads", "soon", true, true},
		{429, "reads", "NaN", true, true},
		{429, "reads", "Mon, 01 Jan 1990 00:00:00 GMT", true, true},
		{503, "", "0x10", false, true},
	} {
		t.Run(tc.ra, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) > 2 {
					w.Header().Set("Content-Type", "application/json")
					w.Write([]byte(`{"items":[],"total":0,"page":1,"size":10,"pages":0}`))
					return
				}
				w.Header().Set("Retry-After", tc.ra)
				if tc.quota != "" {
					w.Header().Set("Hrns-Quota", tc.quota)
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(`{"detail":"busy"}`))
			}))
			defer srv.Close()
			c := client.New(srv.URL, "k", &client.Options{RetryDelay: time.Millisecond})
			done := make(chan error, 1)
			go func() {
				_, err := c.ListSessions(t.Context(), nil)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute): // a hang check
				t.Fatalf("ListSessions still waits after %d requests", n.Load())
			}
			if tc.wantServed {
				if err != nil || n.Load() != 3 {
					t.Fatalf("ListSessions: %v after %d requests; want it served after 2 paced", err, n.Load())
				}
				return
			}
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.StatusCode != tc.status || errors.Is(err, client.ErrBusy) != tc.wantBusy {
				t.Fatalf("ListSessions: %v, want the %d", err, tc.status)
			}
			if ae.RetryAfter < time.Hour || ae.RetryAfter > 24*time.Hour || n.Load() != 1 {
				t.Errorf("RetryAfter %v after %d requests; want an hour to 24h, after 1", ae.RetryAfter, n.Load())
			}
		})
	}
}

// TestErrorBodyBounded: an error answer of 16 MiB of bytes that are not
// UTF-8 (quoted, four bytes each, in APIError.Detail) costs the SDK a
// bounded allocation (1 MiB of it is read); before, it read all 16 MiB
// and quoted them, allocating about 100 MiB.
func TestErrorBodyBounded(t *testing.T) {
	body := bytes.Repeat([]byte{0xff}, 16<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write(body)
	}))
	defer srv.Close()
	c := client.New(srv.URL, "k", nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := c.ListSessions(t.Context(), nil)
	runtime.ReadMemStats(&after)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		t.Fatalf("ListSessions: %v, want the 400", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("%d MiB allocated for an error answer of 16 MiB; want at most 16", n>>20)
	}
	if len(ae.Detail) > 5<<20 || len(ae.Detail) < 1<<20 {
		t.Errorf("a detail of %d bytes; want the first MiB, quoted", len(ae.Detail))
	}
}

// TestEarlyEmptyAnswersPaced: a server that answers every long-poll at
// once with nothing new (204) is asked again after a growing backoff,
// not as fast as the network allows: WaitForCompletion and Stream make
// a few requests in 3 seconds (before: thousands, a core spinning).
func TestEarlyEmptyAnswersPaced(t *testing.T) {
	for _, stream := range []bool{false, true} {
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		c := client.New(srv.URL, "k", &client.Options{RetryDelay: 100 * time.Millisecond})
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		var err error
		if stream {
			for _, e := range c.Session("s").Stream(ctx) {
				err = e
			}
		} else {
			_, err = c.Session("s").WaitForCompletion(ctx)
		}
		cancel()
		srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("stream %v: %v, want the context's deadline", stream, err)
		}
		if got := n.Load(); got > 30 {
			t.Errorf("stream %v: %d long-polls in 3 s against a server that answers at once", stream, got)
		}
	}
}
