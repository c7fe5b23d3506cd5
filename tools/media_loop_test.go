package tools_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/tools"
)

// mediaDir holds a PNG and a PDF for the runs below.
func mediaDir(t *testing.T) (dir string, png, pdf []byte) {
	t.Helper()
	dir = t.TempDir()
	png, pdf = pngBytes(t, 32, 16), pdfBytes("Quarterly report")
	writeBytes(t, dir, "chart.png", png)
	writeBytes(t, dir, "docs/report.pdf", pdf)
	writeBytes(t, dir, "notes.txt", []byte("text\n"))
	return dir, png, pdf
}

// TestUploadMediaAgentRun checks what the model receives when it calls
// upload_media through the loop: the attachments, in the tool results.
func TestUploadMediaAgentRun(t *testing.T) {
	dir, png, pdf := mediaDir(t)
	ts, err := tools.ByName([]string{"list_files", "upload_media"}, &tools.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewModel(
		llmtest.Calls(
			call("c1", "upload_media", `{"path":"chart.png"}`),
			call("c2", "upload_media", `{"path":"docs/report.pdf"}`),
			call("c3", "upload_media", `{"path":"notes.txt"}`),
		),
		llmtest.Text("A chart and a report."),
	)
	res, err := loop.NewAgent(model, ts, nil).Run(t.Context(), []llm.Message{llm.UserMessage("look")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "A chart and a report." {
		t.Errorf("answer %q", res.Answer)
	}
	results := toolResults(t, model)
	check := func(id string, kind llm.PartKind, mime, name string, data []byte, text string) {
		t.Helper()
		r := results[id]
		if r.IsError || len(r.Content) != 2 {
			t.Fatalf("%s: %+v", id, r)
		}
		if !strings.HasPrefix(r.Content[0].Text, text) {
			t.Errorf("%s: text %q, want %q...", id, r.Content[0].Text, text)
		}
		m := r.Content[1]
		if m.Kind != kind || m.Media == nil || m.Media.MIMEType != mime || m.Media.Name != name || !bytes.Equal(m.Media.Data, data) {
			t.Errorf("%s: attachment %s %+v", id, m.Kind, m.Media)
		}
	}
	check("c1", llm.PartImage, "image/png", "", png, "chart.png: PNG image, 32x16 pixels, ")
	check("c2", llm.PartDocument, "application/pdf", "report.pdf", pdf, "docs/report.pdf: PDF document, ")
	if r := results["c3"]; !r.IsError || !strings.Contains(r.Text(), "notes.txt holds text") {
		t.Errorf("c3: %+v", r)
	}
}

// TestUploadMediaAnthropic runs upload_media through the Anthropic
// provider against its loopback server, and checks that the request holds
// the image and the document as blocks of the tool_result.
func TestUploadMediaAnthropic(t *testing.T) {
	dir, png, pdf := mediaDir(t)
	ts, err := tools.ByName([]string{"upload_media"}, &tools.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv := anthropictest.NewServer(
		anthropictest.Reply{ToolCalls: []llm.ToolCall{
			anthropictest.ToolCall("toolu_1", "upload_media", `{"path":"chart.png"}`),
			anthropictest.ToolCall("toolu_2", "upload_media", `{"path":"docs/report.pdf"}`),
		}},
		anthropictest.Reply{Text: "Seen."},
	)
	defer srv.Close()
	client := &anthropic.Client{BaseURL: srv.URL(), Model: "claude-test", HTTPClient: srv.Client()}
	res, err := loop.NewAgent(client, ts, nil).Run(t.Context(), []llm.Message{llm.UserMessage("look")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "Seen." {
		t.Errorf("answer %q", res.Answer)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	type source struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	}
	type block struct {
		Type      string  `json:"type"`
		Text      string  `json:"text"`
		Title     string  `json:"title"`
		ToolUseID string  `json:"tool_use_id"`
		IsError   bool    `json:"is_error"`
		Source    *source `json:"source"`
		Content   []block `json:"content"`
	}
	var body struct {
		Messages []struct {
			Role    string  `json:"role"`
			Content []block `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	last := body.Messages[len(body.Messages)-1]
	if last.Role != "user" || len(last.Content) != 2 {
		t.Fatalf("last message: %s with %d blocks, want the user turn with two tool results", last.Role, len(last.Content))
	}
	want := []struct {
		id, text, typ, mediaType, title string
		data                            []byte
	}{
		{"toolu_1", "chart.png: PNG image, 32x16 pixels, ", "image", "image/png", "", png},
		{"toolu_2", "docs/report.pdf: PDF document, ", "document", "application/pdf", "report.pdf", pdf},
	}
	for i, w := range want {
		r := last.Content[i]
		if r.Type != "tool_result" || r.ToolUseID != w.id || r.IsError || len(r.Content) != 2 {
			t.Errorf("block %d: %+v", i, r)
			continue
		}
		if r.Content[0].Type != "text" || !strings.HasPrefix(r.Content[0].Text, w.text) {
			t.Errorf("%s: text block %+v", w.id, r.Content[0])
		}
		m := r.Content[1]
		if m.Type != w.typ || m.Title != w.title || m.Source == nil || m.Source.Type != "base64" || m.Source.MediaType != w.mediaType {
			t.Errorf("%s: media block %+v (source %+v)", w.id, m, m.Source)
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(m.Source.Data); err != nil || !bytes.Equal(got, w.data) {
			t.Errorf("%s: the block's data is not the file (%v)", w.id, err)
		}
	}
}

// TestUploadMediaOpenAI runs upload_media through the OpenAI provider.
// Chat Completions has no images in tool messages: the provider must
// either fail the run with llm.ErrUnsupported, naming what it cannot send,
// or carry the image in a user message after the tool messages. Dropping
// the image without a word is what this test refuses.
func TestUploadMediaOpenAI(t *testing.T) {
	dir, png, _ := mediaDir(t)
	ts, err := tools.ByName([]string{"upload_media"}, &tools.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "upload_media", `{"path":"chart.png"}`)}},
		openaitest.Reply{Text: "Seen."},
	)
	defer srv.Close()
	client := &openai.Client{BaseURL: srv.URL(), Model: "test-model"}
	res, err := loop.NewAgent(client, ts, nil).Run(t.Context(), []llm.Message{llm.UserMessage("look")})
	if err != nil {
		if !errors.Is(err, llm.ErrUnsupported) || !strings.Contains(err.Error(), "images in tool results") {
			t.Fatalf("the run failed with %v; want an error wrapping llm.ErrUnsupported that names images in tool results", err)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("%d requests sent; the unsupported one must not be sent", n)
		}
		t.Logf("the OpenAI provider refuses images in tool results: %v", err)
		return
	}
	if res.Answer != "Seen." {
		t.Errorf("answer %q", res.Answer)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var body struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	toolAt, imageAt := -1, -1
	for i, m := range body.Messages {
		switch {
		case m.Role == "tool" && m.ToolCallID == "call_1":
			toolAt = i
		case m.Role == "user" && bytes.Contains(m.Content, []byte(url)):
			imageAt = i
		}
	}
	if toolAt < 0 || imageAt < toolAt {
		t.Errorf("the tool message is at %d and the image at %d: want the image in a user message after the tool message\n%s", toolAt, imageAt, reqs[1].Body)
	}
}
