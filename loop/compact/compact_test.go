package compact_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop/compact"
)

// transcript builds a system prompt, a task, then n turns each calling a
// tool whose result has size bytes, with signed reasoning, then an answer
// turn waiting for its results when open is set.
func transcript(n, size int, open bool) []llm.Message {
	msgs := []llm.Message{llm.SystemMessage("sys"), llm.UserMessage("task")}
	for i := range n {
		id := "c" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: "think " + id, Signature: "sig-" + id}},
			{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: "read", Arguments: llm.Arguments(`{"n":1}`)}},
		}})
		msgs = append(msgs, llm.ToolResultMessage(id, strings.Repeat("r", size)))
	}
	if open {
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "open", Name: "read", Arguments: llm.Arguments(`{}`)}},
		}})
	}
	return msgs
}

// checkPairs fails unless every tool result answers a call of the
// assistant message right before its tool messages, every call but those
// of the last message has its result, and reasoning is signed.
func checkPairs(t *testing.T, msgs []llm.Message) {
	t.Helper()
	var open map[string]bool
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			if len(open) > 0 {
				t.Fatalf("message %d: calls %v have no result", i, open)
			}
			open = make(map[string]bool)
			for _, c := range m.ToolCalls() {
				open[c.ID] = true
			}
			for _, p := range m.Parts {
				if p.Kind == llm.PartReasoning && p.Reasoning.Signature != "sig-"+strings.TrimPrefix(p.Reasoning.Text, "think ") {
					t.Fatalf("message %d: reasoning %+v altered", i, p.Reasoning)
				}
			}
		case llm.RoleTool:
			for _, p := range m.Parts {
				if !open[p.ToolResult.CallID] {
					t.Fatalf("message %d: result %q answers no open call", i, p.ToolResult.CallID)
				}
				delete(open, p.ToolResult.CallID)
			}
		default:
			if len(open) > 0 {
				t.Fatalf("message %d (%s): calls %v have no result", i, m.Role, open)
			}
		}
	}
}

func TestTrim(t *testing.T) {
	msgs := transcript(10, 4000, true)
	before := compact.Estimate(msgs)
	res, err := compact.Trim{}.Compact(context.Background(), &compact.Request{Messages: msgs, Target: before / 2})
	if err != nil {
		t.Fatal(err)
	}
	checkPairs(t, res.Messages)
	if res.Strategy != "trim" || res.Trimmed == 0 || len(res.Messages) != len(msgs) {
		t.Fatalf("strategy %q, trimmed %d, %d messages", res.Strategy, res.Trimmed, len(res.Messages))
	}
	if after := compact.Estimate(res.Messages); after > before/2 {
		t.Errorf("estimate %d after, target %d", after, before/2)
	}
	first := res.Messages[3].Parts[0].ToolResult.Text()
	if want := "[compacted: the result of read (call ca) was dropped to save context: 4000 bytes]"; first != want {
		t.Errorf("stub %q, want %q", first, want)
	}
	// The input is untouched, and the latest turns are whole.
	if msgs[3].Parts[0].ToolResult.Text() != strings.Repeat("r", 4000) {
		t.Error("the input was modified")
	}
	n := len(res.Messages)
	if got := res.Messages[n-2].Parts[0].ToolResult.Text(); len(got) != 4000 {
		t.Errorf("the latest result was trimmed: %q", got)
	}
	// Trimming again finds only stubs and the kept turns.
	again, _ := compact.Trim{}.Compact(context.Background(), &compact.Request{Messages: res.Messages, Target: 1})
	if again.Trimmed != res.Trimmed && again.Trimmed != 0 {
		t.Logf("trimmed %d more", again.Trimmed)
	}
	checkPairs(t, again.Messages)
}

func TestSummarize(t *testing.T) {
	msgs := transcript(10, 4000, false)
	model := llmtest.NewModel(llmtest.Text("We read ten files."))
	res, err := compact.Summarize{}.Compact(context.Background(), &compact.Request{Messages: msgs, Target: 100, Model: model, ModelName: "m", KeepTurns: 3})
	if err != nil {
		t.Fatal(err)
	}
	checkPairs(t, res.Messages)
	// sys, task, summary, then three whole turns.
	if len(res.Messages) != 3+6 || res.Summarized != 14 || res.Strategy != "summarize" {
		t.Fatalf("%d messages, summarized %d, strategy %q", len(res.Messages), res.Summarized, res.Strategy)
	}
	if s := res.Messages[2]; s.Role != llm.RoleUser || !strings.HasPrefix(s.Text(), compact.SummaryHeader) || !strings.HasSuffix(s.Text(), "We read ten files.") {
		t.Errorf("summary message %+v", s)
	}
	req := model.Requests()[0]
	if len(req.Tools) != 0 || req.Model != "m" || req.Messages[0].Text() != compact.DefaultSummaryPrompt {
		t.Errorf("summary request: %d tools, model %q, system %q", len(req.Tools), req.Model, req.Messages[0].Text())
	}
	if in := req.Messages[1].Text(); !strings.Contains(in, "[assistant calls read, call ca]") || !strings.Contains(in, "[tool result of call cg]") {
		t.Errorf("summary input %q", in[:200])
	}
}

func TestSummarizeFailureLeavesTranscript(t *testing.T) {
	msgs := transcript(6, 100, false)
	model := llmtest.NewModel(llmtest.Fail(llm.ErrOverloaded))
	// Too little to trim: the failed summary is the chain's error.
	_, err := compact.Default().Compact(context.Background(), &compact.Request{Messages: msgs, Target: 1, Model: model})
	if !errors.Is(err, llm.ErrOverloaded) {
		t.Fatalf("err %v", err)
	}
	// A trim that helped is kept when the summary then fails.
	msgs = transcript(6, 4000, false)
	model.Push(llmtest.Fail(llm.ErrOverloaded))
	res, err := compact.Default().Compact(context.Background(), &compact.Request{Messages: msgs, Target: 1, Model: model})
	if err != nil || res.Strategy != "trim" || res.Trimmed != 4 {
		t.Fatalf("err %v, %+v", err, res)
	}
}

func TestTooFewTurns(t *testing.T) {
	msgs := transcript(2, 4000, false)
	res, err := compact.Default().Compact(context.Background(), &compact.Request{Messages: msgs, Target: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Strategy != "" || len(res.Messages) != len(msgs) {
		t.Errorf("strategy %q, %d messages", res.Strategy, len(res.Messages))
	}
}

func TestChainStopsAtTarget(t *testing.T) {
	msgs := transcript(10, 4000, false)
	// The model has no reply: a summary request would fail.
	model := llmtest.NewModel()
	res, err := compact.Default().Compact(context.Background(), &compact.Request{Messages: msgs, Target: compact.Estimate(msgs) / 2, Model: model})
	if err != nil {
		t.Fatal(err)
	}
	if res.Strategy != "trim" || len(model.Requests()) != 0 {
		t.Errorf("strategy %q, %d model requests", res.Strategy, len(model.Requests()))
	}
	// A target trimming cannot reach summarises too.
	model.Push(llmtest.Text("summary"))
	res, err = compact.Default().Compact(context.Background(), &compact.Request{Messages: msgs, Target: 1, Model: model})
	if err != nil {
		t.Fatal(err)
	}
	checkPairs(t, res.Messages)
	if res.Strategy != "trim+summarize" || res.Summarized == 0 || res.Trimmed == 0 {
		t.Errorf("%+v", res)
	}
}

// A transcript whose old part is only an earlier summary is not
// summarised again.
func TestSummarizeNoTurns(t *testing.T) {
	msgs := []llm.Message{llm.SystemMessage("s"), llm.UserMessage("task"), llm.UserMessage(compact.SummaryHeader + "before")}
	msgs = append(msgs, transcript(2, 100, false)[2:]...)
	model := llmtest.NewModel()
	res, err := compact.Summarize{}.Compact(context.Background(), &compact.Request{Messages: msgs, Target: 1, Model: model})
	if err != nil || res.Strategy != "" || len(model.Requests()) != 0 {
		t.Fatalf("err %v, strategy %q, %d requests", err, res.Strategy, len(model.Requests()))
	}
}

// The summary request stays within half the window.
func TestSummarizeInputWithinWindow(t *testing.T) {
	msgs := transcript(40, 4000, false)
	model := llmtest.NewModel(llmtest.Text("short"))
	_, err := compact.Summarize{}.Compact(context.Background(), &compact.Request{Messages: msgs, Target: 1, Model: model, Window: 8000})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(model.Requests()[0].Messages[1].Text()); n > 16000+100 {
		t.Errorf("summary input of %d bytes for a window of 8000 tokens", n)
	}
}

// Random transcripts (parallel calls, failed calls, signed reasoning, mid-run
// system and user messages, earlier stubs) compacted with random targets
// and kept turns: the head and the latest turns are intact, calls stay with
// their results, and nothing grows.
func TestCompactInvariantsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		msgs := []llm.Message{llm.SystemMessage("sys"), llm.UserMessage("task")}
		id := 0
		for range rng.IntN(30) {
			switch rng.IntN(6) {
			case 0:
				msgs = append(msgs, llm.UserMessage("steer "+strings.Repeat("u", rng.IntN(500))))
			case 1:
				msgs = append(msgs, llm.SystemMessage("note"))
			case 2:
				msgs = append(msgs, llm.AssistantMessage("thinking aloud "+strings.Repeat("a", rng.IntN(500))))
			default:
				a := llm.Message{Role: llm.RoleAssistant}
				if rng.IntN(2) == 0 {
					text := fmt.Sprintf("think %d", id)
					a.Parts = append(a.Parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: text, Signature: "sig-" + strings.TrimPrefix(text, "think ")}})
				}
				res := llm.Message{Role: llm.RoleTool}
				for range 1 + rng.IntN(3) {
					id++
					cid := fmt.Sprintf("c%d", id)
					a.Parts = append(a.Parts, llm.Part{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: cid, Name: "t", Arguments: llm.Arguments(`{}`)}})
					res.Parts = append(res.Parts, llm.Part{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: cid, Content: []llm.Part{llm.TextPart(strings.Repeat("r", rng.IntN(3000)))}, IsError: rng.IntN(5) == 0}})
				}
				msgs = append(msgs, a, res)
			}
		}
		keep := rng.IntN(4)
		before := compact.Estimate(msgs)
		model := llmtest.NewModel(llmtest.Text("summary"))
		res, err := compact.Default().Compact(context.Background(), &compact.Request{
			Messages: msgs, Target: rng.IntN(before + 1), KeepTurns: keep, Model: model, Window: 1 + rng.IntN(20000),
		})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		out := res.Messages
		checkPairs(t, out)
		if compact.Estimate(out) > before {
			t.Fatalf("case %d: grew from %d to %d", i, before, compact.Estimate(out))
		}
		if out[0].Text() != "sys" || out[1].Text() != "task" {
			t.Fatalf("case %d: head lost", i)
		}
		// The latest turns are the input's, message for message.
		if keep == 0 {
			keep = 2
		}
		tail, n := len(msgs), 0
		for j := len(msgs) - 1; j >= 2 && n < keep; j-- {
			if msgs[j].Role == llm.RoleAssistant {
				tail, n = j, n+1
			}
		}
		if n == keep {
			k := len(msgs) - tail
			if len(out) < k || fmt.Sprint(out[len(out)-k:]) != fmt.Sprint(msgs[tail:]) {
				t.Fatalf("case %d: the last %d messages changed", i, k)
			}
		}
	}
}
