package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestServeBrowserFiles: in hrns serve, a file given with a user message
// is in the session's files folder, where the web environment's browser
// takes it for a page's file input (browser_file_upload files/NAME, with
// a real Chromium), and what a page downloads is saved there and
// reported by an AttachmentEvent of origin "agent" whose url serves it.
func TestServeBrowserFiles(t *testing.T) {
	needChromium(t)
	t.Parallel()
	var mu sync.Mutex
	var received []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /form", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Upload</title><form method=post action=/up enctype=multipart/form-data>
			<label>Document <input type=file name=doc></label><button>Send</button></form><p><a href="/dl" download>Get the report</a></p>`)
	})
	mux.HandleFunc("POST /up", func(w http.ResponseWriter, r *http.Request) {
		f, h, err := r.FormFile("doc")
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		b, _ := io.ReadAll(f)
		mu.Lock()
		received = append(received, h.Filename+"="+string(b))
		mu.Unlock()
		fmt.Fprint(w, `<!doctype html><title>Sent</title><p>received</p>`)
	})
	mux.HandleFunc("GET /dl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		w.Header().Set("Content-Disposition", `attachment; filename="report.csv"`)
		fmt.Fprint(w, "a,b\n1,2\n")
	})
	site := httptest.NewServer(mux)
	defer site.Close()

	refOf := func(body []byte, role, name string) string {
		// The latest snapshot's: the last match in the conversation.
		all := regexp.MustCompile(role+` \\"`+name+`[^\\]*\\" \[ref=(e\d+)\]`).FindAllSubmatch(body, -1)
		if all == nil {
			return "e0"
		}
		return string(all[len(all)-1][1])
	}
	tool := func(name, args string) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_"+name, name, args)}}
	}
	replies := []openaitest.Reply{
		tool("browser_navigate", fmt.Sprintf(`{"url":%q}`, site.URL+"/form")),
		{Func: func(body []byte) openaitest.Reply {
			return tool("browser_click", fmt.Sprintf(`{"element":"file input","ref":%q}`, refOf(body, "button", "Document")))
		}},
		tool("browser_file_upload", `{"paths":["files/input.txt"]}`),
		{Func: func(body []byte) openaitest.Reply {
			return tool("browser_click", fmt.Sprintf(`{"element":"send","ref":%q}`, refOf(body, "button", "Send")))
		}},
		tool("browser_navigate", fmt.Sprintf(`{"url":%q}`, site.URL+"/form")),
		{Func: func(body []byte) openaitest.Reply {
			return tool("browser_click", fmt.Sprintf(`{"element":"report","ref":%q}`, refOf(body, "link", "Get the report")))
		}},
	}
	// Waits until a result says the download was saved.
	for range 100 {
		replies = append(replies, openaitest.Reply{Func: func(body []byte) openaitest.Reply {
			if strings.Contains(string(body), "Downloaded") {
				return openaitest.Reply{Text: "done"}
			}
			return tool("browser_wait_for", `{"time":0.2}`)
		}})
	}
	model := openaitest.NewServer(replies...)
	defer model.Close()
	const key, other = "sk-files", "sk-other"
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": key + "," + other},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"), "--workdir", t.TempDir(),
		"--browser-allow", site.Listener.Addr().String(), "--browser-profiles", t.TempDir(), "--public-url", "https://hrns.example.com")
	code, b := api(t, "POST", s.url+"/api/v2/sessions", key, fmt.Sprintf(`{"agent":{"name":"uploader","environments":[{"kind":"web","headless":true}]},
		"messages":{"message":"Send the file, then get the report.","files":[{"name":"input.txt","source":%q}]}}`, base64.StdEncoding.EncodeToString([]byte("from the user"))))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	var sess struct{ ID string }
	json.Unmarshal(b, &sess)
	var events []struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, b = api(t, "GET", s.url+"/api/v2/sessions/"+sess.ID, key, "")
		if strings.Contains(string(b), `"status":"completed"`) || strings.Contains(string(b), `"status":"failed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session did not end: %s\n%s", b, s.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, b = api(t, "GET", s.url+"/api/v2/sessions/"+sess.ID+"/events?type=AttachmentEvent&size=200", key, ""); code != http.StatusOK {
		t.Fatalf("events: %d %s", code, b)
	}
	var page struct {
		Events *[]struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"events"`
		Items *[]struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"items"`
	}
	json.Unmarshal(b, &page)
	switch {
	case page.Items != nil:
		events = *page.Items
	case page.Events != nil:
		events = *page.Events
	}
	var atts []string
	var agentURL string
	for _, ev := range events {
		if ev.Type == "AttachmentEvent" {
			var a struct{ Origin, Name, Path, URL string }
			json.Unmarshal(ev.Data, &a)
			atts = append(atts, a.Origin+" "+a.Path)
			if a.Origin == "agent" {
				agentURL = a.URL
			}
		}
	}
	mu.Lock()
	got := fmt.Sprint(received)
	mu.Unlock()
	if got != "[input.txt=from the user]" {
		t.Errorf("the site received %s\n%s", got, s.logs.String())
	}
	if fmt.Sprint(atts) != "[user files/input.txt agent files/report.csv]" {
		t.Fatalf("attachments %v (events %d: %s)", atts, len(events), b)
	}
	path, ok := strings.CutPrefix(agentURL, "https://hrns.example.com")
	if !ok {
		t.Fatalf("the agent's file's url %q is not under --public-url", agentURL)
	}
	if code, b := api(t, "GET", s.url+path, key, ""); code != http.StatusOK || string(b) != "a,b\n1,2\n" {
		t.Errorf("GET %s: %d %q", path, code, b)
	}
	if code, _ := api(t, "GET", s.url+path, other, ""); code != http.StatusNotFound {
		t.Errorf("another key's GET %s: %d", path, code)
	}
}
