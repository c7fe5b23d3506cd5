package loop_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// screenImage is the PNG-typed image of screenshot n: its base64 is found
// whole in a request body that carries it, in every provider's format.
func screenImage(n int) []byte {
	return fmt.Appendf([]byte("\x89PNG\r\n\x1a\n"), "screen-%06d.", n) // 24 bytes: base64 without padding
}

// TestRequestsKeepRecentImages: an agent that takes a screenshot at every
// step sends at most KeepImages of them per request, always the latest,
// over each provider's wire format (the providers' cached encodings of the
// conversation are rewritten when older images leave); the transcript
// keeps them all. Before, every request carried every screenshot: 130 in
// the last, which Anthropic refuses (at most 100).
func TestRequestsKeepRecentImages(t *testing.T) {
	const steps = 130
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			var mu sync.Mutex
			calls := 0
			model, reqs, stop := w.serve(func(body []byte) wireReply {
				mu.Lock()
				defer mu.Unlock()
				if calls == steps {
					return wireReply{text: "Seen them all."}
				}
				calls++
				return wireReply{calls: []llm.ToolCall{tc(fmt.Sprintf("call_%d", calls), "screenshot", `{}`)}}
			})
			defer stop()
			var mu2 sync.Mutex
			shots := 0
			screenshot := &loop.ToolDef{Name: "screenshot", Description: "Shows the screen.",
				Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
					mu2.Lock()
					defer mu2.Unlock()
					shots++
					return &loop.Output{Content: []llm.Part{llm.TextPart(fmt.Sprintf("screenshot %d", shots)), llm.ImagePart("image/png", screenImage(shots))}}, nil
				}}
			agent := loop.NewAgent(model, loop.MustToolset(screenshot), &loop.Options{MaxTurns: steps + 5})
			res, err := agent.Run(t.Context(), []llm.Message{llm.UserMessage("Watch the screen.")})
			if err != nil || res.Answer != "Seen them all." {
				t.Fatalf("err %v, answer %q", err, res.Answer)
			}
			bodies := reqs()
			if len(bodies) != steps+1 {
				t.Fatalf("%d requests", len(bodies))
			}
			maxSent := 0
			for i, b := range bodies {
				var sent []int
				for n := 1; n <= i; n++ {
					if strings.Contains(string(b), base64.StdEncoding.EncodeToString(screenImage(n))) {
						sent = append(sent, n)
					}
				}
				maxSent = max(maxSent, len(sent))
				if len(sent) > 50 {
					t.Fatalf("request %d carries %d images", i+1, len(sent))
				}
				// The images sent are the latest ones, none missing
				// between the oldest sent and the newest taken.
				if i > 0 && (len(sent) == 0 || sent[len(sent)-1] != i || sent[0] != i-len(sent)+1) {
					t.Fatalf("request %d carries images %v, want the latest up to %d", i+1, sent, i)
				}
				if i > 50 && !strings.Contains(string(b), "an earlier image was left out") {
					t.Fatalf("request %d does not say images were left out", i+1)
				}
			}
			if maxSent != 50 {
				t.Errorf("at most %d images in a request, want 50", maxSent)
			}
			kept := 0
			for _, m := range res.Messages {
				for _, p := range m.Parts {
					if p.Kind == llm.PartToolResult {
						for _, c := range p.ToolResult.Content {
							if c.Kind == llm.PartImage {
								kept++
							}
						}
					}
				}
			}
			if kept != steps {
				t.Errorf("the transcript keeps %d images, want %d", kept, steps)
			}
		})
	}
}

// TestKeepImagesAll: a negative KeepImages sends every image.
func TestKeepImagesAll(t *testing.T) {
	w := wires[0]
	calls := 0
	model, reqs, stop := w.serve(func([]byte) wireReply {
		if calls == 60 {
			return wireReply{text: "done"}
		}
		calls++
		return wireReply{calls: []llm.ToolCall{tc(fmt.Sprintf("call_%d", calls), "screenshot", `{}`)}}
	})
	defer stop()
	shots := 0
	screenshot := &loop.ToolDef{Name: "screenshot", Description: "Shows the screen.",
		Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			shots++
			return &loop.Output{Content: []llm.Part{llm.ImagePart("image/png", screenImage(shots))}}, nil
		}}
	if _, err := loop.NewAgent(model, loop.MustToolset(screenshot), &loop.Options{MaxTurns: 70, KeepImages: -1}).Run(t.Context(), []llm.Message{llm.UserMessage("go")}); err != nil {
		t.Fatal(err)
	}
	bodies := reqs()
	last := string(bodies[len(bodies)-1])
	for n := 1; n <= 60; n++ {
		if !strings.Contains(last, base64.StdEncoding.EncodeToString(screenImage(n))) {
			t.Fatalf("the last request lacks image %d", n)
		}
	}
}
