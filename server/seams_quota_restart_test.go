package server_test

import (
	"encoding/base64"
	"image/color"
	"net/http"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/quota"
	"github.com/hrns-dev/hrns/session"
)

// TestSeamsQuotaAcrossRestart: the token quota (platform/quota's policy,
// the runtime's count) counts each committed step once across a restart:
// the step that waits for a computer call, not the step the restart cut
// (never committed), and the step run again after it; another key's
// count is its own.
func TestSeamsQuotaAcrossRestart(t *testing.T) {
	stuck := make(chan struct{})
	asked := make(chan struct{}, 1)
	r := newRestartable(t, func() *session.Options {
		return &session.Options{TokenQuota: &quota.Tokens{Limit: 1_000_000, Period: quota.PeriodMonth}}
	}, nil,
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "computer", `{"action":"screenshot"}`)}, Usage: &llm.Usage{InputTokens: 10, OutputTokens: 1}},
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			asked <- struct{}{}
			<-stuck
			return openaitest.Reply{Text: "late", Usage: &llm.Usage{InputTokens: 500, OutputTokens: 500}}
		}},
		openaitest.Reply{Text: "Red.", Usage: &llm.Usage{InputTokens: 20, OutputTokens: 2}},
	)
	t.Cleanup(func() { close(stuck) })
	used := func(key string) int64 {
		t.Helper()
		var q tokenQuota
		r.expect(r.do("GET", "/api/v2/quota/tokens", key, nil), http.StatusOK).json(&q)
		return *q.Used
	}
	id := r.create(keyAlice, `{"agent":{"name":"a","environments":["desktop"]},"messages":"What colour?"}`)
	r.follow(keyAlice, id).status(session.StatusAwaitingToolResults)
	if n := used(keyAlice); n != 11 {
		t.Fatalf("after the first step: used %d, want 11", n)
	}
	r.restart()
	if n := used(keyAlice); n != 11 {
		t.Fatalf("after a restart while waiting: used %d, want 11", n)
	}
	red := base64.StdEncoding.EncodeToString(pngOf(t, color.RGBA{255, 0, 0, 255}))
	r.expect(r.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice,
		`{"kind":"tool_result","tool_req":{"tool_name":"computer","id":"call_1"},"result":{"text":"s","image":{"type":"base64","media_type":"image/png","source":"`+red+`"}}}`), http.StatusAccepted)
	select {
	case <-asked:
	case <-time.After(20 * time.Second):
		t.Fatal("the model was not asked after the result")
	}
	r.restart()
	r.follow(keyAlice, id).status(session.StatusCompleted)
	if n := used(keyAlice); n != 33 {
		t.Errorf("after the answer: used %d, want 11 + 22", n)
	}
	if n := used(keyBob); n != 0 {
		t.Errorf("bob used %d", n)
	}
}
