package server_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/quota"
	"github.com/hrns-dev/hrns/session"
)

type tokenQuota struct {
	Limit       *int64     `json:"limit"`
	Used        *int64     `json:"used"`
	Remaining   *int64     `json:"remaining"`
	WindowStart time.Time  `json:"window_start"`
	WindowEnd   *time.Time `json:"window_end"`
}

// TestTokenQuotaHTTP: GET /api/v2/quota/tokens reports the key's use;
// once it is spent, creating a session and sending a message answer 429
// with Retry-After at the window's end, for that key only.
func TestTokenQuotaHTTP(t *testing.T) {
	e := newEnv(t, &envOptions{session: &session.Options{TokenQuota: &quota.Tokens{Limit: 20, Period: quota.PeriodDay}}},
		openaitest.Reply{Text: "done", Usage: &llm.Usage{InputTokens: 20, OutputTokens: 5}})
	var q tokenQuota
	e.expect(e.do("GET", "/api/v2/quota/tokens", keyAlice, nil), http.StatusOK).json(&q)
	if *q.Limit != 20 || *q.Used != 0 || *q.Remaining != 20 || q.WindowEnd.Sub(q.WindowStart) != 24*time.Hour {
		t.Errorf("before any step: %+v", q)
	}
	id := e.create(keyAlice, `{"agent":{"name":"support-agent"},"messages":"Hi."}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	e.expect(e.do("GET", "/api/v2/quota/tokens", keyAlice, nil), http.StatusOK).json(&q)
	if *q.Used != 25 || *q.Remaining != 0 {
		t.Errorf("after a step of 25 tokens: used %d, remaining %d", *q.Used, *q.Remaining)
	}
	for _, r := range []*response{
		e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"support-agent"},"messages":"Again."}`),
		e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, `{"message":"Again."}`),
	} {
		if r.status != http.StatusTooManyRequests || !strings.Contains(string(r.body), "token quota exceeded") {
			t.Errorf("over the quota: %d %s, want 429", r.status, r.body)
		}
		wait, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || wait < 1 || wait > 24*3600 {
			t.Errorf("Retry-After %q, want the seconds to the window's end", r.header.Get("Retry-After"))
		}
	}
	// Bob's key has its own quota.
	e.expect(e.do("GET", "/api/v2/quota/tokens", keyBob, nil), http.StatusOK).json(&q)
	if *q.Used != 0 {
		t.Errorf("bob used %d", *q.Used)
	}
	e.expect(e.do("GET", "/api/v2/quota/tokens", "", nil), http.StatusUnauthorized)
}

// TestTokenQuotaUnlimitedHTTP: without a limit, the report's limit and
// remaining are null and the window is the calendar month.
func TestTokenQuotaUnlimitedHTTP(t *testing.T) {
	e := newEnv(t, nil)
	var q tokenQuota
	e.expect(e.do("GET", "/api/v2/quota/tokens", keyAlice, nil), http.StatusOK).json(&q)
	if q.Limit != nil || q.Remaining != nil || q.Used == nil || *q.Used != 0 || q.WindowStart.Day() != 1 || q.WindowEnd.Day() != 1 {
		t.Errorf("unlimited: %+v", q)
	}
}
