package loop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/gemini/geminitest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

func TestNewWithOptions(t *testing.T) {
	approved := 0
	approver := loop.ApproverFunc(func(ctx context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		approved++
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	risky := echoTool()
	risky.Name, risky.RequiresApproval = "risky", true
	model := llmtest.NewModel(
		llmtest.Call("c1", "risky", `{"text":"a"}`),
		llmtest.Call("c2", "lookup", `{"id":"1"}`),
		llmtest.Call("c3", "lookup", `{"id":"2"}`), // the last turn: dropped
	)
	lookup := loop.NewSimpleTool("Looks up.", []loop.ToolArgument{{Name: "id", Type: "string"}}, func(map[string]any) string { return "found" })
	agent := loop.New(model, map[string]loop.Tool{"lookup": lookup},
		loop.WithToolsets(nil, loop.MustToolset(risky)),
		loop.WithOptions(&loop.Options{MaxTurns: 50}),
		loop.WithOptions(&loop.Options{MaxTurns: 3, Approver: approver}), // the last wins
	)
	if diff := cmp.Diff([]string{"lookup", "risky"}, agent.Tools().Names()); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	res, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("go")})
	if err == nil || res.Budget != "max_turns" || len(res.Turns) != 3 || approved != 1 {
		t.Fatalf("err %v, budget %q, %d turns, %d approvals", err, res.Budget, len(res.Turns), approved)
	}
}

func TestNewPanicsOnDuplicate(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "echo") {
			t.Errorf("recovered %v", r)
		}
	}()
	echo := loop.NewSimpleTool("x", nil, func(map[string]any) string { return "" })
	loop.New(llmtest.NewModel(), map[string]loop.Tool{"echo": echo}, loop.WithToolsets(loop.MustToolset(echoTool())))
}

func knobOptions() *loop.Options {
	topP := 0.5
	seed := int64(3)
	no := false
	return &loop.Options{
		TopP:              &topP,
		Seed:              &seed,
		StopSequences:     []string{"STOP"},
		ParallelToolCalls: &no,
		ToolChoice:        llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "echo"},
		Reasoning:         &llm.ReasoningConfig{Effort: "low"},
		Cache:             &llm.CacheHint{Long: true},
		Extra:             map[string]json.RawMessage{"metadata": json.RawMessage(`{"k":"v"}`)},
	}
}

// TestRequestKnobs checks that the knobs of Options reach every request as
// they are, except ToolChoice, which only the first request carries, and
// which the final request of a spent budget overrides.
func TestRequestKnobs(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "echo", `{"text":"a"}`),
		llmtest.Call("c2", "echo", `{"text":"b"}`),
		llmtest.Text("done"),
	)
	opts := knobOptions()
	opts.MaxTurns = 3
	agent := loop.NewAgent(model, loop.MustToolset(echoTool()), opts)
	opts.StopSequences[0] = "changed after NewAgent" // the agent keeps its copy
	opts.Extra["x"] = json.RawMessage(`1`)
	if _, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("go")}); err != nil {
		t.Fatal(err)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	want := knobOptions()
	for i, r := range reqs {
		if *r.TopP != *want.TopP || *r.Seed != *want.Seed || !cmp.Equal(r.StopSequences, want.StopSequences) ||
			*r.ParallelToolCalls || r.Reasoning.Effort != "low" || !r.Cache.Long || !cmp.Equal(r.Extra, want.Extra) {
			t.Errorf("request %d: %+v", i, r)
		}
	}
	for i, mode := range []llm.ToolChoiceMode{llm.ToolChoiceTool, llm.ToolChoiceAuto, llm.ToolChoiceNone} {
		if got := reqs[i].ToolChoice.Mode; got != mode {
			t.Errorf("request %d: tool choice %q, want %q", i, got, mode)
		}
	}
}

// TestKnobsAcrossProviders runs a two-turn loop with every knob set through
// both providers' scripted servers and checks what each body carries.
func TestKnobsAcrossProviders(t *testing.T) {
	tests := []struct {
		name          string
		serve         func() (llm.Model, func() [][]byte, func())
		first, second string   // tool_choice in the first body; in the second
		both          []string // fields of every body
		never         []string
	}{
		{"openai", func() (llm.Model, func() [][]byte, func()) {
			srv := openaitest.NewServer(openaitest.Reply{ToolCalls: []llm.ToolCall{tc("c1", "echo", `{"text":"a"}`)}}, openaitest.Reply{Text: "ok"})
			return &openai.Client{BaseURL: srv.URL(), Model: "m"}, func() (out [][]byte) {
				for _, r := range srv.Requests() {
					out = append(out, r.Body)
				}
				return out
			}, srv.Close
		},
			`"tool_choice":{"type":"function","function":{"name":"echo"}}`, "",
			[]string{`"parallel_tool_calls":false`, `"top_p":0.5`, `"seed":3`, `"reasoning_effort":"low"`, `"prompt_cache_retention":"24h"`, `"stop":["STOP"]`, `"metadata":{"k":"v"}}`},
			nil},
		{"anthropic", func() (llm.Model, func() [][]byte, func()) {
			srv := anthropictest.NewServer(anthropictest.Reply{ToolCalls: []llm.ToolCall{tc("c1", "echo", `{"text":"a"}`)}}, anthropictest.Reply{Text: "ok"})
			return &anthropic.Client{BaseURL: srv.URL(), Model: "m"}, func() (out [][]byte) {
				for _, r := range srv.Requests() {
					out = append(out, r.Body)
				}
				return out
			}, srv.Close
		},
			`"tool_choice":{"type":"tool","name":"echo","disable_parallel_tool_use":true}`,
			`"tool_choice":{"type":"auto","disable_parallel_tool_use":true}`, // parallel_tool_calls false
			[]string{`"top_p":0.5`, `"output_config":{"effort":"low"}`, `"ttl":"1h"`, `"stop_sequences":["STOP"]`, `"metadata":{"k":"v"}}`},
			[]string{`"seed"`}},
		{"gemini", func() (llm.Model, func() [][]byte, func()) {
			srv := geminitest.NewServer(geminitest.Reply{ToolCalls: []llm.ToolCall{tc("c1", "echo", `{"text":"a"}`)}}, geminitest.Reply{Text: "ok"})
			return &gemini.Client{BaseURL: srv.URL(), Model: "m"}, func() (out [][]byte) {
				for _, r := range srv.Requests() {
					out = append(out, r.Body)
				}
				return out
			}, srv.Close
		},
			`"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["echo"]}}`, "",
			[]string{`"topP":0.5`, `"seed":3`, `"stopSequences":["STOP"]`, `"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"low"}`, `"metadata":{"k":"v"}}`},
			[]string{`parallel`, `cache`, `Cache`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model, bodies, stop := tt.serve()
			defer stop()
			agent := loop.NewAgent(model, loop.MustToolset(echoTool()), knobOptions())
			if _, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("go")}); err != nil {
				t.Fatal(err)
			}
			bs := bodies()
			if len(bs) != 2 {
				t.Fatalf("%d requests", len(bs))
			}
			for i, b := range bs {
				for _, f := range tt.both {
					if !strings.Contains(string(b), f) {
						t.Errorf("request %d lacks %s:\n%s", i, f, b)
					}
				}
				for _, f := range tt.never {
					if strings.Contains(string(b), f) {
						t.Errorf("request %d holds %s", i, f)
					}
				}
			}
			if !strings.Contains(string(bs[0]), tt.first) {
				t.Errorf("first request lacks %s:\n%s", tt.first, bs[0])
			}
			if tt.second == "" && strings.Contains(string(bs[1]), `"tool_choice"`) || !strings.Contains(string(bs[1]), tt.second) {
				t.Errorf("second request: tool choice is not %q:\n%s", tt.second, bs[1])
			}
		})
	}
}
