package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// agentAttachments lists the AttachmentEvents of origin "agent" of a
// session, by path.
func agentAttachments(t *testing.T, base, key, id string) []string {
	t.Helper()
	code, b := api(t, "GET", base+"/api/v2/sessions/"+id+"/events?type=AttachmentEvent&size=200", key, "")
	if code != http.StatusOK {
		t.Fatalf("events: %d %s", code, b)
	}
	var page struct {
		Items []struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"items"`
	}
	json.Unmarshal(b, &page)
	var out []string
	for _, ev := range page.Items {
		var a struct{ Origin, Path string }
		json.Unmarshal(ev.Data, &a)
		if ev.Type == "AttachmentEvent" && a.Origin == "agent" {
			out = append(out, a.Path)
		}
	}
	return out
}

// waitForStatus polls a session until its status is one of want (bounded).
func waitForStatus(t *testing.T, base, key, id string, want ...string) string {
	t.Helper()
	var b []byte
	for range 1200 {
		_, b = api(t, "GET", base+"/api/v2/sessions/"+id, key, "")
		for _, w := range want {
			if strings.Contains(string(b), `"status":"`+w+`"`) {
				return w
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("session %s never reached %v: %s", id, want, b)
	return ""
}

// findFilesFolder finds the files folder of the one session under the
// workdir (bounded walk).
func findFilesFolder(workdir string) string {
	found, n := "", 0
	filepath.WalkDir(workdir, func(p string, d fs.DirEntry, err error) error {
		if n++; err != nil || n > 1000 || found != "" {
			return filepath.SkipAll
		}
		if d.IsDir() && d.Name() == "files" {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// TestServeFilesLeftWhenParked: a file that appears in the session's files
// folder after the agent's last server-side call (a background download
// finishing, here written while the model thinks) is reported as the
// agent's by the commit that parks the run (waiting for a client-side
// tool's result), and once only: not again when the run that answers
// ends, while a file made after that is reported by the answer's commit.
func TestServeFilesLeftWhenParked(t *testing.T) {
	t.Parallel()
	workdir := t.TempDir()
	write := func(name, content string) {
		if dir := findFilesFolder(workdir); dir != "" {
			os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)
		}
	}
	model := openaitest.NewServer(
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			write("left.csv", "a,b\n")
			return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_ask", "confirm", `{"question":"Keep it?"}`)}}
		}},
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			write("last.txt", "the end")
			return openaitest.Reply{Text: "kept"}
		}},
	)
	defer model.Close()
	const key = "sk-left"
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": key},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"), "--workdir", workdir)
	code, b := api(t, "POST", s.url+"/api/v2/sessions", key, fmt.Sprintf(`{"agent":{"name":"keeper","tools":[{"name":"confirm","description":"Asks the user.","input_schema":{"type":"object","properties":{"question":{"type":"string"}}}}]},
		"messages":{"message":"Make the file.","files":[{"name":"input.txt","source":%q}]}}`, base64.StdEncoding.EncodeToString([]byte("from the user"))))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	var sess struct{ ID string }
	json.Unmarshal(b, &sess)
	waitForStatus(t, s.url, key, sess.ID, "awaiting_tool_results")
	if got := agentAttachments(t, s.url, key, sess.ID); fmt.Sprint(got) != "[files/left.csv]" {
		t.Fatalf("while the session waits, the agent's attachments are %v, want [files/left.csv]\n%s", got, s.logs.String())
	}
	code, b = api(t, "POST", s.url+"/api/v2/sessions/"+sess.ID+"/tool_results", key,
		`{"kind":"tool_result","tool_req":{"tool_name":"confirm","args":{"question":"Keep it?"},"id":"call_ask"},"result":"yes"}`)
	if code/100 != 2 {
		t.Fatalf("tool result: %d %s", code, b)
	}
	if st := waitForStatus(t, s.url, key, sess.ID, "completed", "failed"); st != "completed" {
		t.Fatalf("the session %s\n%s", st, s.logs.String())
	}
	if got := agentAttachments(t, s.url, key, sess.ID); fmt.Sprint(got) != "[files/left.csv files/last.txt]" {
		t.Fatalf("the agent's attachments are %v, want [files/left.csv files/last.txt]", got)
	}
}

// TestServeLateDownload: with a real Chromium, a download that finishes
// after the agent's last tool call (the site sends the rest of the file
// while the model writes its answer) is saved in the session's files
// folder and reported as the agent's by the commit of the answer.
func TestServeLateDownload(t *testing.T) {
	needChromium(t)
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Reports</title><p><a href="/late" download>Get the report</a></p>`)
	})
	mux.HandleFunc("GET /late", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		w.Header().Set("Content-Disposition", `attachment; filename="late.csv"`)
		w.Header().Set("Content-Length", "8")
		fmt.Fprint(w, "a,b\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		case <-time.After(time.Minute):
		}
		fmt.Fprint(w, "1,2\n")
	})
	site := httptest.NewServer(mux)
	defer site.Close()
	defer once.Do(func() { close(release) })
	workdir := t.TempDir()
	tool := func(name, args string) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_"+name, name, args)}}
	}
	model := openaitest.NewServer(
		tool("browser_navigate", fmt.Sprintf(`{"url":%q}`, site.URL+"/page")),
		openaitest.Reply{Func: func(body []byte) openaitest.Reply {
			ref := "e0"
			if m := regexp.MustCompile(`link \\"Get the report\\" \[ref=(e\d+)\]`).FindSubmatch(body); m != nil {
				ref = string(m[1])
			}
			return tool("browser_click", fmt.Sprintf(`{"element":"report","ref":%q}`, ref))
		}},
		// The last call has returned: the download ends now, and the
		// answer waits until the file is in the files folder (bounded).
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			once.Do(func() { close(release) })
			for range 600 {
				if dir := findFilesFolder(workdir); dir != "" {
					if b, err := os.ReadFile(filepath.Join(dir, "late.csv")); err == nil && string(b) == "a,b\n1,2\n" {
						break
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			return openaitest.Reply{Text: "The report is downloading."}
		}},
	)
	defer model.Close()
	const key = "sk-late"
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": key},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"), "--workdir", workdir,
		"--browser-allow", site.Listener.Addr().String(), "--browser-profiles", t.TempDir())
	code, b := api(t, "POST", s.url+"/api/v2/sessions", key, fmt.Sprintf(`{"agent":{"name":"reporter","environments":[{"kind":"web","headless":true}]},
		"messages":{"message":"Get the report.","files":[{"name":"input.txt","source":%q}]}}`, base64.StdEncoding.EncodeToString([]byte("from the user"))))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	var sess struct{ ID string }
	json.Unmarshal(b, &sess)
	if st := waitForStatus(t, s.url, key, sess.ID, "completed", "failed"); st != "completed" {
		t.Fatalf("the session %s\n%s", st, s.logs.String())
	}
	if got := agentAttachments(t, s.url, key, sess.ID); fmt.Sprint(got) != "[files/late.csv]" {
		t.Fatalf("the agent's attachments are %v, want [files/late.csv]\n%s", got, s.logs.String())
	}
}
