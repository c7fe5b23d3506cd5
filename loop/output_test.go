package loop_test

import (
	"context"
	"encoding/json"
	"errors"
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

type city struct {
	Name       string `json:"name" jsonschema:"the city's name"`
	Population int    `json:"population"`
}

func TestOutputSchemaFor(t *testing.T) {
	s, err := loop.OutputSchemaFor[city]()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"type":"object","properties":{"name":{"type":"string","description":"the city's name"},"population":{"type":"integer"}},"required":["name","population"],"additionalProperties":false}`
	if diff := cmp.Diff(want, string(s.Schema)); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}
}

// TestOutputStrict checks which schemas are sent as strict: only closed
// object schemas (every property required, additionalProperties false, all
// the way down).
func TestOutputStrict(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		strict bool
	}{
		{"closed", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`, true},
		{"no properties", `{"type":"object","properties":{},"additionalProperties":false}`, true},
		{"optional property", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`, false},
		{"open object", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, false},
		{"open nested object", `{"type":"object","properties":{"a":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}},"required":["a"],"additionalProperties":false}`, false},
		{"open object in an array", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{}}}},"required":["a"],"additionalProperties":false}`, false},
		{"closed nested, nullable", `{"type":"object","properties":{"a":{"type":["null","object"],"properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}},"required":["a"],"additionalProperties":false}`, true},
		{"open object in $defs", `{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"required":["a"],"additionalProperties":false,"$defs":{"x":{"type":"object"}}}`, false},
		{"root not an object", `{"type":"array","items":{"type":"string"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := llmtest.NewModel(llmtest.Text(`{"a":"x"}`))
			agent := loop.NewAgent(model, nil, &loop.Options{OutputSchema: &loop.OutputSchema{Schema: json.RawMessage(tt.schema)}})
			agent.Run(context.Background(), []llm.Message{llm.UserMessage("go")})
			reqs := model.Requests()
			if len(reqs) == 0 || reqs[0].ResponseFormat == nil {
				t.Fatal("no response format sent")
			}
			if got := reqs[0].ResponseFormat.Strict; got != tt.strict {
				t.Errorf("strict = %v, want %v", got, tt.strict)
			}
		})
	}
}

func cityAgent(model llm.Model, opts *loop.Options) *loop.Agent {
	s, err := loop.OutputSchemaFor[city]()
	if err != nil {
		panic(err)
	}
	if opts == nil {
		opts = &loop.Options{}
	}
	opts.OutputSchema = s
	return loop.NewAgent(model, loop.MustToolset(echoTool()), opts)
}

func TestOutputInvalidThenValid(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "echo", `{"text":"Paris"}`),
		llmtest.Text("Paris has about two million people."), // not JSON
		llmtest.Text(`{"name":"Paris"}`),                    // a field missing
		llmtest.Text("```json\n{\"name\":\"Paris\",\"population\":2100000}\n```"),
	)
	agent := cityAgent(model, nil)
	chunks, res := collect(t, agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("Paris?")}))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	rejected := only(chunks, loop.ChunkAnswerRejected)
	if len(rejected) != 2 || rejected[0].Turn != 2 || rejected[1].Turn != 3 ||
		!strings.Contains(rejected[1].Content, "rejected") || !strings.Contains(rejected[1].Err.Error(), "population") {
		t.Errorf("answer_rejected chunks: %+v", rejected)
	}
	if want := `{"name":"Paris","population":2100000}`; res.Answer != want {
		t.Errorf("answer %q, want %q", res.Answer, want)
	}
	reqs := model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for i, r := range reqs {
		if r.ResponseFormat == nil || r.ResponseFormat.Name != "final_answer" || !r.ResponseFormat.Strict {
			t.Errorf("request %d: response format %+v", i, r.ResponseFormat)
		}
	}
	// Each rejected answer is followed by a user message that says why.
	last := func(r *llm.Request) string { return r.Messages[len(r.Messages)-1].Text() }
	if got := last(reqs[2]); !strings.Contains(got, "not valid JSON") {
		t.Errorf("third request ends with %q", got)
	}
	if got := last(reqs[3]); !strings.Contains(got, "population") {
		t.Errorf("fourth request ends with %q", got)
	}
}

func TestOutputNeverValid(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Text("one"),
		llmtest.Text(`{"name":1}`),
		llmtest.Text(`{"name":"x","population":"many"}`),
		llmtest.Text(`{"name":"never asked"}`),
	)
	agent := cityAgent(model, nil)
	res, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("?")})
	var oe *loop.OutputError
	if !errors.As(err, &oe) || !errors.Is(err, loop.ErrInvalidOutput) {
		t.Fatalf("err %v, want an *OutputError", err)
	}
	if oe.Attempts != 3 || oe.Answer != `{"name":"x","population":"many"}` || !strings.Contains(oe.Err.Error(), "population") {
		t.Errorf("error %+v", oe)
	}
	if res.Status != loop.StatusFailed || model.Remaining() != 1 {
		t.Errorf("status %s, %d replies left", res.Status, model.Remaining())
	}
}

func TestOutputRetriesOption(t *testing.T) {
	for _, tt := range []struct {
		retries, requests int
	}{{-1, 1}, {1, 2}, {0, 3}, {4, 5}} {
		model := llmtest.NewModel(llmtest.Text("a"), llmtest.Text("b"), llmtest.Text("c"), llmtest.Text("d"), llmtest.Text("e"), llmtest.Text("f"))
		agent := cityAgent(model, &loop.Options{MaxOutputRetries: tt.retries})
		_, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("?")})
		if !errors.Is(err, loop.ErrInvalidOutput) || len(model.Requests()) != tt.requests {
			t.Errorf("MaxOutputRetries %d: err %v after %d requests, want %d", tt.retries, err, len(model.Requests()), tt.requests)
		}
	}
}

// A budget forces the final answer: the schema still applies, and there is
// no turn left to correct an invalid answer.
func TestOutputBudget(t *testing.T) {
	t.Run("valid", func(t *testing.T) {
		model := llmtest.NewModel(llmtest.Call("c1", "echo", `{"text":"a"}`), llmtest.Text(`{"name":"Oslo","population":700000}`))
		agent := cityAgent(model, &loop.Options{MaxTurns: 2})
		res, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("?")})
		if err != nil || res.Budget != "max_turns" {
			t.Fatalf("err %v, budget %q", err, res.Budget)
		}
		last := model.Requests()[1]
		if last.ResponseFormat == nil || last.ToolChoice.Mode != llm.ToolChoiceNone {
			t.Errorf("final request: format %v, tool choice %v", last.ResponseFormat, last.ToolChoice)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		model := llmtest.NewModel(llmtest.Call("c1", "echo", `{"text":"a"}`), llmtest.Text(`Oslo`), llmtest.Text(`{"name":"Oslo","population":700000}`))
		agent := cityAgent(model, &loop.Options{MaxTurns: 2})
		res, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("?")})
		var oe *loop.OutputError
		if !errors.As(err, &oe) || oe.Attempts != 1 || res.Budget != "max_turns" || len(model.Requests()) != 2 {
			t.Fatalf("err %v, budget %q, %d requests", err, res.Budget, len(model.Requests()))
		}
	})
}

func TestOutputSchemaInvalid(t *testing.T) {
	for name, s := range map[string]*loop.OutputSchema{
		"not JSON":          {Schema: json.RawMessage(`{`)},
		"not a schema":      {Schema: json.RawMessage(`{"type":3}`)},
		"bad name":          {Name: "a b", Schema: json.RawMessage(`{"type":"object"}`)},
		"unresolvable $ref": {Schema: json.RawMessage(`{"$ref":"#/$defs/nope"}`)},
	} {
		model := llmtest.NewModel(llmtest.Text("{}"))
		agent := loop.NewAgent(model, nil, &loop.Options{OutputSchema: s})
		_, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("?")})
		if !errors.Is(err, loop.ErrOutputSchema) || len(model.Requests()) != 0 {
			t.Errorf("%s: err %v after %d requests", name, err, len(model.Requests()))
		}
	}
}

func TestRunTyped(t *testing.T) {
	model := llmtest.NewModel(llmtest.Text(`{"name":"Rome","population":2800000}`), llmtest.Text("plain text"))
	agent := loop.New(model, nil)
	got, res, err := loop.RunTyped[city](context.Background(), agent, []llm.Message{llm.UserMessage("Rome?")})
	if err != nil {
		t.Fatal(err)
	}
	if got != (city{"Rome", 2800000}) || res.Status != loop.StatusCompleted {
		t.Errorf("got %+v, status %s", got, res.Status)
	}
	// The agent itself has no schema: a plain run accepts any answer.
	res, err = agent.Run(context.Background(), []llm.Message{llm.UserMessage("hi")})
	if err != nil || res.Answer != "plain text" || model.Requests()[1].ResponseFormat != nil {
		t.Errorf("plain run after RunTyped: %v, %q", err, res.Answer)
	}
}

// TestOutputAcrossProviders runs an invalid-then-valid structured answer
// through both providers' wire formats and checks the bodies sent.
func TestOutputAcrossProviders(t *testing.T) {
	const schema = `{"type":"object","properties":{"name":{"type":"string","description":"the city's name"},"population":{"type":"integer"}},"required":["name","population"],"additionalProperties":false}`
	tests := []struct {
		name   string
		serve  func(texts ...string) (llm.Model, func() [][]byte, func())
		format string // the body's rendering of the format
	}{
		{"openai", func(texts ...string) (llm.Model, func() [][]byte, func()) {
			var replies []openaitest.Reply
			for _, s := range texts {
				replies = append(replies, openaitest.Reply{Text: s})
			}
			srv := openaitest.NewServer(replies...)
			bodies := func() (out [][]byte) {
				for _, r := range srv.Requests() {
					out = append(out, r.Body)
				}
				return out
			}
			return &openai.Client{BaseURL: srv.URL(), Model: "m"}, bodies, srv.Close
		}, `"response_format":{"type":"json_schema","json_schema":{"name":"final_answer","schema":` + schema + `,"strict":true}}`},
		{"anthropic", func(texts ...string) (llm.Model, func() [][]byte, func()) {
			var replies []anthropictest.Reply
			for _, s := range texts {
				replies = append(replies, anthropictest.Reply{Text: s})
			}
			srv := anthropictest.NewServer(replies...)
			bodies := func() (out [][]byte) {
				for _, r := range srv.Requests() {
					out = append(out, r.Body)
				}
				return out
			}
			return &anthropic.Client{BaseURL: srv.URL(), Model: "m"}, bodies, srv.Close
		}, `"output_config":{"format":{"type":"json_schema","schema":` + schema + `}}`},
		{"gemini", func(texts ...string) (llm.Model, func() [][]byte, func()) {
			var replies []geminitest.Reply
			for _, s := range texts {
				replies = append(replies, geminitest.Reply{Text: s})
			}
			srv := geminitest.NewServer(replies...)
			bodies := func() (out [][]byte) {
				for _, r := range srv.Requests() {
					out = append(out, r.Body)
				}
				return out
			}
			return &gemini.Client{BaseURL: srv.URL(), Model: "m"}, bodies, srv.Close
		}, `"responseMimeType":"application/json","responseSchema":{"type":"OBJECT","properties":{"name":{"type":"STRING","description":"the city's name"},"population":{"type":"INTEGER"}},"required":["name","population"],"propertyOrdering":["name","population"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model, bodies, stop := tt.serve(`{"name":"Lyon"}`, `{"name":"Lyon","population":520000}`)
			defer stop()
			got, res, err := loop.RunTyped[city](context.Background(), loop.New(model, nil), []llm.Message{llm.UserMessage("Lyon?")})
			if err != nil || got != (city{"Lyon", 520000}) {
				t.Fatalf("got %+v, err %v", got, err)
			}
			if len(res.Turns) != 2 {
				t.Errorf("%d turns", len(res.Turns))
			}
			bs := bodies()
			if len(bs) != 2 {
				t.Fatalf("%d requests", len(bs))
			}
			for i, b := range bs {
				if !strings.Contains(string(b), tt.format) {
					t.Errorf("request %d does not hold %s:\n%s", i, tt.format, b)
				}
			}
			if !strings.Contains(string(bs[1]), `population`) || !strings.Contains(string(bs[1]), "rejected") {
				t.Errorf("second request does not say why the answer was rejected:\n%s", bs[1])
			}
		})
	}
}
