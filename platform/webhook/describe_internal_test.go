package webhook

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

// timeoutError is a net.Error that timed out, as the transport's
// ResponseHeaderTimeout gives.
type timeoutError struct{}

func (timeoutError) Error() string   { return "net/http: timeout awaiting response headers" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// TestDescribeTimeout: an attempt that timed out says so whichever timer
// fired first, the attempt's context or the transport's own (the same
// length), which used to depend on the scheduler.
func TestDescribeTimeout(t *testing.T) {
	done, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for name, tc := range map[string]struct {
		err error
		ctx context.Context
	}{
		"context":   {&url.Error{Op: "Post", URL: "http://x", Err: context.DeadlineExceeded}, done},
		"transport": {&url.Error{Op: "Post", URL: "http://x", Err: timeoutError{}}, context.Background()},
	} {
		if got := describe(tc.err, tc.ctx, time.Second); !strings.HasPrefix(got, "timed out after 1s") {
			t.Errorf("%s: %q, want a timeout", name, got)
		}
	}
	if got := describe(&url.Error{Op: "Post", URL: "http://x", Err: errors.New("connection refused")}, context.Background(), time.Second); got != "connection refused" {
		t.Errorf("a refusal reads %q", got)
	}
}
