package loop_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	loopcompact "github.com/hrns-dev/hrns/loop/compact"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// freshModel is the OpenAI provider checked against itself: before each
// request of the run (sent with the run's llm.Conversation, whose encoded
// messages the provider reuses) it encodes the same request without the
// conversation, from scratch, and keeps that body to compare.
type freshModel struct {
	cached, fresh *openai.Client
	mu            sync.Mutex
	want          [][]byte // the bodies encoded from scratch, in order
	srv           *httptest.Server
}

func newFreshModel(t *testing.T, url string) *freshModel {
	m := &freshModel{cached: &openai.Client{BaseURL: url, APIKey: "k", Model: "m"}}
	// The fresh requests go to a server that keeps their body and
	// refuses them: only the body matters.
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.want = append(m.want, b)
		m.mu.Unlock()
		http.Error(w, `{"error":{"message":"recorded","type":"invalid_request_error"}}`, http.StatusBadRequest)
	}))
	t.Cleanup(m.srv.Close)
	m.fresh = &openai.Client{BaseURL: m.srv.URL + "/v1", APIKey: "k", Model: "m"}
	return m
}

func (m *freshModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	plain := *req
	plain.Conversation = nil
	for range m.fresh.Stream(ctx, &plain) {
	}
	return m.cached.Stream(ctx, req)
}

// TestCompactionRewritesOwnedConversation checks that a run's requests are
// byte for byte what they would be without the provider's cache of encoded
// messages, when compaction rewrites the transcript: the run owns its
// llm.Conversation, so the cache reuses what it encoded without comparing,
// and every rewrite must reach it (llm.Conversation.Rewrote). Without it,
// the requests after a compaction would send the old tool results again.
func TestCompactionRewritesOwnedConversation(t *testing.T) {
	const turns = 8
	result := strings.Repeat("a long line of a tool result. ", 80) // about 2.4 KB
	var replies []openaitest.Reply
	for k := range turns {
		replies = append(replies, openaitest.Reply{
			ToolCalls: []llm.ToolCall{openaitest.ToolCall(fmt.Sprintf("call_%d", k), "read", `{"path":"f"}`)},
			Usage:     &llm.Usage{InputTokens: int64(700 * (k + 1)), OutputTokens: 10},
		})
	}
	replies = append(replies, openaitest.Reply{Text: "done"})
	srv := openaitest.NewServer(replies...)
	defer srv.Close()
	model := newFreshModel(t, srv.URL())

	type in struct {
		Path string `json:"path"`
	}
	read := loop.NewTool("read", "reads", func(context.Context, in) (string, error) { return result, nil })
	agent := loop.NewAgent(model, loop.MustToolset(read), &loop.Options{
		Compaction: &loop.Compaction{ContextWindow: 4000, KeepTurns: 1, Strategy: loopcompact.Trim{}},
	})
	compactions := 0
	var res *loop.Result
	for c := range agent.RunLoop(context.Background(), []llm.Message{llm.SystemMessage("s"), llm.UserMessage("go")}) {
		switch c.Type {
		case loop.ChunkCompaction:
			compactions++
		case loop.ChunkEnd:
			res = c.Result
		}
	}
	if res == nil || res.Err != nil || res.Answer != "done" {
		t.Fatalf("run ended with %+v", res)
	}
	if compactions == 0 {
		t.Fatal("no compaction: the test does not test what it is for")
	}
	got := srv.Requests()
	if len(got) != turns+1 || len(model.want) != len(got) {
		t.Fatalf("%d requests sent and %d encoded afresh, want %d", len(got), len(model.want), turns+1)
	}
	for i := range got {
		if !bytes.Equal(got[i].Body, model.want[i]) {
			t.Errorf("request %d (after %d compactions in the run) differs from its encoding from scratch:\n%s\nwant\n%s", i+1, compactions, got[i].Body, model.want[i])
		}
	}
}
