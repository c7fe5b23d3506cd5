package session_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// TestClaimFairAcrossKeys: the dispatcher's workers go to the keys with
// work in turn, not to the oldest sessions of all keys. Key A has 200
// sessions created first, key B two created after; with four workers,
// both of B's are among the four sessions started first (before, the
// four were A's oldest, and B's waited for A's whole backlog). The
// model holds every request until the four are in, so the count is
// exact: no fifth session can start meanwhile.
func TestClaimFairAcrossKeys(t *testing.T) {
	eachStore(t, testClaimFairAcrossKeys)
}

func testClaimFairAcrossKeys(t *testing.T, st store.Store) {
	release := make(chan struct{})
	started := make(chan string, 300)
	model := llmtest.NewModel()
	for range 202 {
		model.Push(llmtest.Reply{Func: func(req *llm.Request) llmtest.Reply {
			started <- req.Messages[len(req.Messages)-1].Text()
			<-release
			return llmtest.Text("fine")
		}})
	}
	m, _ := newLogged(t, st, model, &session.Options{Workers: 4})
	mk := func(key, text string) {
		t.Helper()
		body := fmt.Sprintf(`{"agent":{"name":"a"},"messages":%q}`, text)
		var req session.Request
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		if _, created, err := m.Create(t.Context(), &session.CreateParams{Owner: key, Request: &req, Raw: json.RawMessage(body)}); err != nil || !created {
			t.Fatalf("create %s: created %v, %v", text, created, err)
		}
	}
	for i := range 200 {
		mk("key-a", fmt.Sprintf("a%03d", i))
	}
	mk("key-b", "b0")
	mk("key-b", "b1")
	start(t, m)
	var first []string
	for range 4 {
		first = append(first, <-started)
	}
	close(release)
	slices.Sort(first)
	if !slices.Contains(first, "b0") || !slices.Contains(first, "b1") {
		t.Errorf("the first four sessions started: %v; want B's two (b0, b1) among them", first)
	}
}
