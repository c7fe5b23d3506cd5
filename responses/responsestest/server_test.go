package responsestest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/responses"
	"github.com/hrns-dev/hrns/responses/responsestest"
)

// Every event names its type in its event line and its data, and the
// sequence numbers count up from 0, as in OpenAI's streams.
func TestEncodeFraming(t *testing.T) {
	body := responsestest.Encode(responsestest.Reply{
		Reasoning: "why", Encrypted: "enc", Text: "some words to split over deltas", Refusal: "no",
		ToolCalls: []llm.ToolCall{responsestest.ToolCall("c1", "f", `{"a":1}`)},
	}, "m")
	events := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	for i, ev := range events {
		name, data, ok := strings.Cut(ev, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") {
			t.Fatalf("event %d is not an event line and a data line: %q", i, ev)
		}
		var head struct {
			Type string `json:"type"`
			Seq  int    `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(data), &head); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if head.Type != strings.TrimPrefix(name, "event: ") || head.Seq != i {
			t.Errorf("event %d: %q has type %q, sequence %d", i, name, head.Type, head.Seq)
		}
	}
	if last := events[len(events)-1]; !strings.HasPrefix(last, "event: response.completed\n") {
		t.Errorf("last event %q", last)
	}
}

func TestServer(t *testing.T) {
	srv := responsestest.NewServer(
		responsestest.Reply{Reasoning: "r", Encrypted: "e", Text: "t", Refusal: "no", ToolCalls: []llm.ToolCall{responsestest.ToolCall("c1", "f", `{"a":1}`)}},
		responsestest.Reply{Text: "cut", Incomplete: "max_output_tokens"},
		responsestest.Reply{Func: func(body []byte) responsestest.Reply {
			if bytes.Contains(body, []byte(`"store":false`)) {
				return responsestest.Reply{Text: "echo ok"}
			}
			return responsestest.Reply{Text: "stored"}
		}},
		responsestest.Reply{Raw: "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n"},
		responsestest.Reply{Status: 401, Body: responsestest.ErrorBody("invalid_request_error", "invalid_api_key", "bad key")},
	)
	defer srv.Close()
	c := &responses.Client{BaseURL: srv.URL(), Model: "m"}
	ask := func() (*llm.Response, error) {
		return llm.Collect(c.Stream(t.Context(), &llm.Request{Messages: []llm.Message{llm.UserMessage("x")}}))
	}

	resp, err := ask()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.Parts) != 3 || resp.Message.Parts[0].Reasoning.Redacted != "e" || resp.Message.Text() != "tno" ||
		resp.FinishReason != llm.FinishToolCalls || resp.Message.ToolCalls()[0].ID != "c1" {
		t.Errorf("resp = %+v", resp)
	}
	if resp, err = ask(); err != nil || resp.FinishReason != llm.FinishLength || resp.Message.Text() != "cut" {
		t.Errorf("incomplete: %+v, %v", resp, err)
	}
	if resp, err = ask(); err != nil || resp.Message.Text() != "echo ok" {
		t.Errorf("func: %+v, %v", resp, err)
	}
	if _, err = ask(); !errors.Is(err, llm.ErrOverloaded) {
		t.Errorf("raw error event: %v", err)
	}
	if _, err = ask(); !errors.Is(err, llm.ErrAuth) {
		t.Errorf("status: %v", err)
	}
	if _, err = ask(); !errors.Is(err, llm.ErrOverloaded) || !strings.Contains(err.Error(), "no more scripted replies") {
		t.Errorf("beyond the script: %v", err)
	}
	if n := len(srv.Requests()); n != 6 {
		t.Errorf("%d requests recorded", n)
	}
}
