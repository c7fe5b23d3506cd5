package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestServeBrowserModes: a real hrns serve and Chromium. The multimodal
// mode shows, with the page's snapshot, its Markdown and a screenshot;
// page_chars cuts the page text the agent reads, saying so; the text mode
// offers no screenshot; bad settings are refused when the session is
// created.
func TestServeBrowserModes(t *testing.T) {
	needChromium(t)
	t.Parallel()
	long := strings.Repeat("Widgets of every size and colour. ", 60)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>Catalog</title><h1>Catalog</h1><p>%s</p><p><a href="/end">The end</a></p>`, long)
	}))
	defer site.Close()
	look := openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_look", "browser_snapshot", `{}`)}}
	model := openaitest.NewServer(look, openaitest.Reply{Text: "seen"}, look, openaitest.Reply{Text: "read"})
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"),
		"--browser-allow", site.Listener.Addr().String(), "--browser-profiles", t.TempDir())
	c := client.New(s.url, "", nil)
	run := func(env string) *client.Handle {
		t.Helper()
		var e client.Environment
		if err := json.Unmarshal([]byte(env), &e); err != nil {
			t.Fatal(err)
		}
		h, err := c.StartSession(t.Context(), &client.SessionRequest{
			Agent:    client.AgentRef{Inline: &client.Agent{Name: "looker", Environments: []client.Environment{e}}},
			Messages: client.Text("Look at the page."),
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := h.WaitForCompletion(t.Context())
		if err != nil || res.Status != session.StatusCompleted {
			t.Fatalf("%v %+v\n%s", err, res, s.logs.String())
		}
		return h
	}

	h := run(fmt.Sprintf(`{"kind":"web","start_url":%q,"headless":true,"mode":"multimodal","page_chars":400}`, site.URL))
	reqs := model.Requests()
	body := string(reqs[1].Body)
	for _, want := range []string{"Page snapshot:", "Page as Markdown:", "# Catalog", "page_chars is 400", "data:image/jpeg;base64,"} {
		if !strings.Contains(body, want) {
			t.Errorf("the multimodal snapshot's result lacks %q:\n%.3000s", want, body)
		}
	}
	if strings.Contains(body, "The end") {
		t.Error("page_chars 400 let the end of the page through")
	}
	observed := false
	for ev, err := range h.Stream(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(ev); bytes.Contains(b, []byte(`"kind":"observation_event"`)) && bytes.Contains(b, []byte(`"media_type":"image/jpeg"`)) {
			observed = true
		}
	}
	if !observed {
		t.Error("no observation event carries the multimodal screenshot")
	}

	run(fmt.Sprintf(`{"kind":"web","start_url":%q,"headless":true,"mode":{"type":"text"},"page_chars":120}`, site.URL))
	reqs = model.Requests()
	body = string(reqs[3].Body)
	if !strings.Contains(body, "page_chars is 120") || strings.Contains(body, "data:image/jpeg") || strings.Contains(body, "Page as Markdown") {
		t.Errorf("the text mode's snapshot:\n%.3000s", body)
	}
	if strings.Contains(string(reqs[2].Body), "browser_take_screenshot") {
		t.Error("the text mode offers browser_take_screenshot")
	}

	for env, msg := range map[string]string{
		`{"kind":"web","page_chars":-1}`:      "page_chars must be from 1 to 1000000",
		`{"kind":"web","page_chars":2000000}`: "page_chars must be from 1 to 1000000",
		`{"kind":"web","mode":"cinematic"}`:   "mode.type must be visual, multimodal or text",
		`{"kind":"web","page_chars":"lots"}`:  "page_chars",
		`{"kind":"web","mode":{"type":"tv"}}`: "mode.type must be visual, multimodal or text",
	} {
		var e client.Environment
		json.Unmarshal([]byte(env), &e)
		_, err := c.CreateSession(t.Context(), &client.SessionRequest{
			Agent:    client.AgentRef{Inline: &client.Agent{Name: "x", Environments: []client.Environment{e}}},
			Messages: client.Text("go"),
		}, nil)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want an error saying %q", env, err, msg)
		}
	}
}
