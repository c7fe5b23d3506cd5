package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// Whatever a model writes as arguments, the run goes on: the model reads
// an error that quotes what it wrote, every chunk and the transcript encode
// as JSON, and the transcript decodes back to the same bytes.
func TestMalformedArgumentsAreCarried(t *testing.T) {
	tests := []struct {
		name, args string
		wantErr    string
	}{
		{"unterminated object", `{"path": "notes.txt"`, `not valid JSON`},
		{"not an object", `["notes.txt"]`, `must be a JSON object, not an array`},
		{"a JSON string", `"notes.txt"`, `must be a JSON object, not a string`},
		{"trailing garbage", `{"text":"a"}}`, `not valid JSON`},
		{"NUL and control bytes", "{\"text\":\"a\x00\x1b[2K\"}", `not valid JSON`},
		{"invalid UTF-8", "{\"text\":\"\xff\xfe\"", `not valid JSON`},
		{"huge", `{"text":"` + strings.Repeat("x", 1<<20), `not valid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := llmtest.NewModel(llmtest.Call("c1", "echo", tt.args), llmtest.Text("sorry"))
			agent := loop.NewAgent(model, loop.MustToolset(echoTool()), nil)
			chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
			if res.Status != loop.StatusCompleted || res.Answer != "sorry" {
				t.Fatalf("status %s, answer %q, err %v", res.Status, res.Answer, res.Err)
			}
			results := lastResults(t, model)
			if len(results) != 1 || !results[0].IsError || !strings.Contains(results[0].Text(), tt.wantErr) {
				t.Fatalf("the model read %+v, want an error naming %q", results, tt.wantErr)
			}
			if len(tt.args) < 1000 && tt.wantErr == "not valid JSON" && !strings.Contains(results[0].Text(), "the arguments were: "+strings.ToValidUTF8(tt.args, "\uFFFD")) {
				t.Errorf("the error does not quote what the model wrote: %q", results[0].Text())
			}
			for _, c := range chunks {
				b, err := json.Marshal(c)
				if err != nil {
					t.Fatalf("chunk %s does not encode: %v", c.Type, err)
				}
				if !json.Valid(b) {
					t.Fatalf("chunk %s encodes to invalid JSON: %s", c.Type, b)
				}
			}
			// The transcript survives storage byte for byte.
			b, err := json.Marshal(res.Messages)
			if err != nil {
				t.Fatalf("transcript does not encode: %v", err)
			}
			var back []llm.Message
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if again, _ := json.Marshal(back); string(again) != string(b) {
				t.Errorf("transcript changed in a round trip:\n%.300s\n%.300s", b, again)
			}
			if got := string(back[1].ToolCalls()[0].Arguments); got != string(res.Messages[1].ToolCalls()[0].Arguments) {
				t.Errorf("stored arguments decode as %.60q", got)
			}
			held := string(res.Messages[1].ToolCalls()[0].Arguments)
			if held != strings.ToValidUTF8(tt.args, "\uFFFD") {
				t.Errorf("arguments held as %.60q, want what the model wrote", held)
			}
		})
	}
}

// streamModel is a model that streams the chunks its function gives.
type streamModel func(yield func(llm.Chunk, error) bool)

func (m streamModel) Stream(context.Context, *llm.Request) iter.Seq2[llm.Chunk, error] {
	return iter.Seq2[llm.Chunk, error](m)
}

// Stream indices come from the model: negative, huge and unknown ones
// neither panic nor allocate.
func TestHostileStreamIndices(t *testing.T) {
	for _, idx := range []int{-1, -1 << 62, 1 << 40, 255, 256, 1<<31 - 1} {
		model := streamModel(func(yield func(llm.Chunk, error) bool) {
			_ = yield(llm.Chunk{Kind: llm.ChunkToolCallStart, Index: idx, ID: "c1", Name: "echo"}, nil) &&
				yield(llm.Chunk{Kind: llm.ChunkToolCallDelta, Index: idx, Text: `{"text":"a"}`}, nil) &&
				yield(llm.Chunk{Kind: llm.ChunkToolCallDelta, Index: idx + 7, Text: `?`}, nil) &&
				yield(llm.Chunk{Kind: llm.ChunkDone, Response: &llm.Response{Message: llm.AssistantMessage("done")}}, nil)
		})
		agent := loop.NewAgent(model, loop.MustToolset(echoTool()), nil)
		chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
		if res.Status != loop.StatusCompleted {
			t.Fatalf("index %d: %s %v", idx, res.Status, res.Err)
		}
		deltas := only(chunks, loop.ChunkToolCallDelta)
		if len(deltas) != 3 || deltas[1].ToolCall.ID != "c1" {
			t.Errorf("index %d: deltas %+v", idx, deltas)
		}
	}
}

// Invalid UTF-8 in a call's ID and name is replaced when the loop receives
// it, so the call held in memory is the call a stored transcript gives back.
func TestCallsAreSanitised(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Calls(llm.ToolCall{ID: "c\xff1", Name: "ec\xfeho", Arguments: llm.Arguments("{\"text\":\"\xc3\"}")}),
		llmtest.Text("ok"),
	)
	agent := loop.NewAgent(model, loop.MustToolset(echoTool()), nil)
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	call := res.Messages[1].ToolCalls()[0]
	if call.ID != "c\uFFFD1" || call.Name != "ec\uFFFDho" || string(call.Arguments) != "{\"text\":\"\uFFFD\"}" {
		t.Errorf("call kept as %+q", call)
	}
	if got := lastResults(t, model)[0].CallID; got != call.ID {
		t.Errorf("result answers %q, call is %q", got, call.ID)
	}
}

// Resume checks every ID before applying anything: a valid result followed
// by an unknown ID changes nothing, and the suspension stays usable.
func TestResumeValidatesBeforeApplying(t *testing.T) {
	client := loop.NewClientTool("remote", "Remote.", nil)
	model := llmtest.NewModel(llmtest.Calls(
		llm.ToolCall{ID: "c1", Name: "remote", Arguments: llm.Arguments(`{}`)},
		llm.ToolCall{ID: "c2", Name: "remote", Arguments: llm.Arguments(`{}`)},
	), llmtest.Text("both done"))
	agent := loop.NewAgent(model, loop.MustToolset(client), nil)
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	s := roundTrip(t, res.Suspension)
	before, _ := json.Marshal(s)

	for _, in := range []*loop.ResumeInput{
		{Results: []llm.ToolResult{{CallID: "c1", Content: []llm.Part{llm.TextPart("one")}}, {CallID: "nope"}}},
		{Results: []llm.ToolResult{{CallID: "c1"}}, Approvals: []loop.ApprovalDecision{{CallID: "ghost", Approved: true}}},
	} {
		chunks, res := collect(t, agent.Resume(t.Context(), s, in))
		if !errors.Is(res.Err, loop.ErrUnknownCall) || res.Status != loop.StatusSuspended || res.Suspension != s {
			t.Fatalf("status %s, err %v, suspension kept: %v", res.Status, res.Err, res.Suspension == s)
		}
		var got []string
		for _, c := range chunks {
			got = append(got, string(c.Type))
		}
		if diff := cmp.Diff([]string{"error", "end"}, got); diff != "" {
			t.Errorf("chunks of a refused resumption (-want +got):\n%s", diff)
		}
		if after, _ := json.Marshal(s); string(after) != string(before) {
			t.Fatalf("the suspension changed:\n%s\n%s", before, after)
		}
	}
	_, res = collect(t, agent.Resume(t.Context(), s, &loop.ResumeInput{Results: []llm.ToolResult{
		{CallID: "c1", Content: []llm.Part{llm.TextPart("one")}},
		{CallID: "c2", Content: []llm.Part{llm.TextPart("two")}},
	}}))
	if res.Status != loop.StatusCompleted || res.Answer != "both done" {
		t.Fatalf("the suspension was not usable after the refusal: %s %v", res.Status, res.Err)
	}
}

// A model that ignores the request for a final answer does not end the run
// as a success with an empty answer.
func TestBudgetWithoutAnswerFails(t *testing.T) {
	stubborn := llmtest.Reply{Func: func(*llm.Request) llmtest.Reply { return llmtest.Call("", "echo", `{"text":"again"}`) }}
	model := llmtest.NewModel(stubborn, stubborn, stubborn)
	agent := loop.NewAgent(model, loop.MustToolset(echoTool()), &loop.Options{MaxTurns: 2})
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusFailed || !errors.Is(res.Err, loop.ErrNoAnswer) || res.Budget != "max_turns" {
		t.Fatalf("status %s, budget %q, err %v", res.Status, res.Budget, res.Err)
	}
	if !strings.Contains(res.Err.Error(), "max_turns") {
		t.Errorf("the error does not name the budget: %v", res.Err)
	}
}

// The time budget adds up across suspensions, like turns and tokens.
func TestMaxDurationCarriesAcrossResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := loop.NewClientTool("remote", "Remote.", nil)
		slow := &loop.ToolDef{Name: "slow", Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			time.Sleep(40 * time.Second)
			return loop.TextOutput("ok"), nil
		}}
		model := llmtest.NewModel(
			llmtest.Calls(
				llm.ToolCall{ID: "c1", Name: "slow", Arguments: llm.Arguments(`{}`)},
				llm.ToolCall{ID: "c2", Name: "remote", Arguments: llm.Arguments(`{}`)},
			),
			llmtest.Text("out of time"),
		)
		agent := loop.NewAgent(model, loop.MustToolset(client, slow), &loop.Options{MaxDuration: 30 * time.Second})
		_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
		s := roundTrip(t, res.Suspension)
		if s.Elapsed < 40*time.Second {
			t.Fatalf("elapsed %v kept in the suspension", s.Elapsed)
		}
		time.Sleep(time.Hour) // suspended time does not count
		_, res = collect(t, agent.Resume(t.Context(), s, &loop.ResumeInput{Results: []llm.ToolResult{{CallID: "c2", Content: []llm.Part{llm.TextPart("r")}}}}))
		if res.Budget != "max_duration" || res.Answer != "out of time" {
			t.Fatalf("budget %q, answer %q: the time budget restarted at Resume", res.Budget, res.Answer)
		}
	})
}

// The final-answer prompt is user text, never a format string.
func TestFinalAnswerPromptIsNotAFormat(t *testing.T) {
	model := llmtest.NewModel(llmtest.Text("done"))
	agent := loop.NewAgent(model, nil, &loop.Options{MaxTurns: 1, FinalAnswerPrompt: "100% done? Limit {budget}, %s %d %!"})
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	reqs := model.Requests()
	got := reqs[0].Messages[len(reqs[0].Messages)-1].Text()
	if want := "100% done? Limit max_turns, %s %d %!"; got != want {
		t.Errorf("prompt sent as %q, want %q", got, want)
	}
}
