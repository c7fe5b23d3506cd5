package geminitest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

func TestEncode(t *testing.T) {
	body := Encode(Reply{
		Thoughts: "one two three four five", Text: "Hi there.", Signature: "sig",
		ToolCalls: []llm.ToolCall{ToolCall("", "f", `{"a":1}`), ToolCall("id-2", "g", "")},
		Usage:     &llm.Usage{InputTokens: 10, OutputTokens: 7, CacheReadTokens: 4, ReasoningTokens: 3},
	}, "gemini-test")
	events := bytes.Split(bytes.TrimSuffix(body, []byte("\r\n\r\n")), []byte("\r\n\r\n"))
	if len(events) != 4 { // two thought events, one text event, one of calls
		t.Fatalf("%d events:\n%s", len(events), body)
	}
	for i, ev := range events {
		data, ok := bytes.CutPrefix(ev, []byte("data: "))
		if !ok || !json.Valid(data) {
			t.Fatalf("event %d is not a data line of JSON: %s", i, ev)
		}
	}
	last := string(events[3])
	for _, want := range []string{
		`{"functionCall":{"name":"f","args":{"a":1}},"thoughtSignature":"sig"}`,
		`{"functionCall":{"name":"g","id":"id-2"}}`,
		`"finishReason":"STOP"`,
		`"cachedContentTokenCount":4`, `"thoughtsTokenCount":3`, `"candidatesTokenCount":4`,
	} {
		if !strings.Contains(last, want) {
			t.Errorf("last event lacks %s:\n%s", want, last)
		}
	}
	if strings.Contains(string(events[2]), "thoughtSignature") {
		t.Errorf("text signed though there are calls: %s", events[2])
	}
}

func TestServer(t *testing.T) {
	s := NewServer(Reply{Text: "a"}, Reply{Block: "SAFETY"}, Reply{Status: 429, Body: ErrorBody(429, "RESOURCE_EXHAUSTED", "slow")})
	defer s.Close()
	post := func(path string) (int, string) {
		resp, err := http.Post(s.URL()+path, "application/json", strings.NewReader(`{"contents":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const path = "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
	if code, body := post(path); code != 200 || !strings.Contains(body, `"text":"a"`) || !strings.Contains(body, `"responseId":"resp-test"`) {
		t.Errorf("%d %s", code, body)
	}
	if code, body := post(path); code != 200 || !strings.Contains(body, `"blockReason":"SAFETY"`) {
		t.Errorf("%d %s", code, body)
	}
	if code, body := post(path); code != 429 || !strings.Contains(body, "RESOURCE_EXHAUSTED") {
		t.Errorf("%d %s", code, body)
	}
	if code, body := post(path); code != 500 || !strings.Contains(body, "no more scripted replies") {
		t.Errorf("%d %s", code, body)
	}
	if code, _ := post("/v1beta/models/gemini-test:generateContent"); code != 404 {
		t.Errorf("a method other than streamGenerateContent: %d", code)
	}
	reqs := s.Requests()
	if len(reqs) != 4 || reqs[0].Model != "gemini-test" || string(reqs[0].Body) != `{"contents":[]}` {
		t.Errorf("requests %+v", reqs)
	}
}
