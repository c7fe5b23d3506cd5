package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
	"github.com/hrns-dev/hrns/store/sqlite"
	"github.com/hrns-dev/hrns/tools"
)

// workerAgent is a named agent whose file tools work in each session's
// workspace under root, as hrns serve gives them (DIR/sessions/NAME).
func workerAgent(t *testing.T, root string) *session.AgentConfig {
	probe := t.TempDir()
	return &session.AgentConfig{Workspace: func(name string) (*loop.Toolset, error) {
		if name == "" {
			return tools.Files(probe, &tools.FilesOptions{SkipApproval: true})
		}
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
			return nil, err
		}
		return tools.Files(dir, &tools.FilesOptions{SkipApproval: true})
	}}
}

// newFilesEnv is a server on loopback over st whose sessions' workspaces
// live under root (empty: none); the model is the scripted server's.
func newFilesEnv(t *testing.T, st store.Store, root string, model *openaitest.Server) *env {
	t.Helper()
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		Agents: map[string]*session.AgentConfig{"worker": workerAgent(t, root)},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, Workspaces: root})))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &env{t: t, model: model, url: srv.URL, st: st}
}

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type fileEntry struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	SizeBytes  int64     `json:"size_bytes"`
	ModifiedAt time.Time `json:"modified_at"`
	IsDir      bool      `json:"is_dir"`
}

type fileList struct {
	Path      string      `json:"path"`
	Files     []fileEntry `json:"files"`
	Truncated bool        `json:"truncated"`
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestSessionFiles: a file written through the API is read by the
// agent's read_file in the same session, and the file the agent writes
// is read, listed and served through the API; other keys see nothing.
func TestSessionFiles(t *testing.T) {
	model := openaitest.NewServer(
		calls(
			llm.ToolCall{ID: "call_1", Name: "read_file", Arguments: llm.Arguments(`{"path":"in.txt"}`)},
			llm.ToolCall{ID: "call_2", Name: "write_file", Arguments: llm.Arguments(`{"path":"out/result.txt","content":"the agent wrote this"}`)},
		),
		openaitest.Reply{Text: "done"},
	)
	t.Cleanup(model.Close)
	root := t.TempDir()
	e := newFilesEnv(t, openSQLite(t), root, model)
	id := e.create(keyAlice, `{"agent":"worker"}`)
	e.follow(keyAlice, id).status(session.StatusIdle)
	base := "/api/v2/sessions/" + id + "/files/"

	var wrote struct {
		Path      string `json:"path"`
		SizeBytes int    `json:"size_bytes"`
	}
	e.expect(e.do("POST", base+"write_file", keyAlice, map[string]string{"path": "~/in.txt", "content_base64": b64("hello from the API\n")}), http.StatusOK).json(&wrote)
	if wrote.Path != "in.txt" || wrote.SizeBytes != 19 {
		t.Errorf("write_file = %+v", wrote)
	}
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, `{"message":"Read in.txt and write your result."}`), http.StatusAccepted)
	f := e.follow(keyAlice, id)
	f.status(session.StatusCompleted)
	var readResult string
	for _, ev := range f.events {
		var d session.AgentEventData
		if ev.Type == session.EventAgent && json.Unmarshal(ev.Data, &d) == nil && d.Kind == session.KindToolResult && d.ToolReq.ToolName == "read_file" {
			readResult = string(d.Result)
		}
	}
	if !strings.Contains(readResult, "hello from the API") {
		t.Errorf("the agent's read_file gave %q, want the file the API wrote", readResult)
	}

	var read struct {
		Path          string    `json:"path"`
		ContentBase64 string    `json:"content_base64"`
		SizeBytes     int       `json:"size_bytes"`
		ModifiedAt    time.Time `json:"modified_at"`
	}
	e.expect(e.do("POST", base+"read_file", keyAlice, `{"path":"out/result.txt"}`), http.StatusOK).json(&read)
	if got, _ := base64.StdEncoding.DecodeString(read.ContentBase64); string(got) != "the agent wrote this" || read.SizeBytes != 20 || read.Path != "out/result.txt" || read.ModifiedAt.IsZero() {
		t.Errorf("read_file = %+v (%q)", read, got)
	}

	// Listings: newest first, paged by the last entry's time and name.
	var l fileList
	e.expect(e.do("POST", base+"list_files", keyAlice, `{}`), http.StatusOK).json(&l)
	if l.Path != "." || len(l.Files) != 2 || l.Truncated {
		t.Fatalf("list_files = %+v", l)
	}
	var page []string
	cursor := map[string]any{"max_entries": 1}
	for range 3 {
		var p fileList
		e.expect(e.do("POST", base+"list_files", keyAlice, cursor), http.StatusOK).json(&p)
		for _, fe := range p.Files {
			page = append(page, fe.Name)
			cursor = map[string]any{"max_entries": 1, "modified_before": fe.ModifiedAt, "name_after": fe.Name}
		}
		if !p.Truncated {
			break
		}
	}
	want := []string{l.Files[0].Name, l.Files[1].Name}
	if !slices.Equal(page, want) || !l.Files[0].ModifiedAt.After(l.Files[1].ModifiedAt) && !l.Files[0].ModifiedAt.Equal(l.Files[1].ModifiedAt) {
		t.Errorf("paged listing %v, whole listing %+v", page, l.Files)
	}
	e.expect(e.do("POST", base+"list_files", keyAlice, `{"path":"out"}`), http.StatusOK).json(&l)
	if len(l.Files) != 1 || l.Files[0].Path != "out/result.txt" || l.Files[0].SizeBytes != 20 || l.Files[0].IsDir {
		t.Errorf("list_files out = %+v", l)
	}

	// The file as a resource.
	r := e.expect(e.do("GET", "/api/v2/sessions/"+id+"/resources/files/out/result.txt", keyAlice, nil), http.StatusOK)
	if string(r.body) != "the agent wrote this" || r.header.Get("Content-Type") != "text/plain; charset=utf-8" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("resource = %q, %v", r.body, r.header)
	}
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/resources/files/missing.txt", keyAlice, nil), http.StatusNotFound)

	// Another key's session does not exist for bob.
	for _, op := range []string{"list_files", "read_file", "write_file"} {
		e.expect(e.do("POST", base+op, keyBob, map[string]string{"path": "in.txt", "content_base64": b64("x")}), http.StatusNotFound)
	}
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/resources/files/in.txt", keyBob, nil), http.StatusNotFound)
	e.expect(e.do("POST", base+"read_file", keyAlice, `{"path":"in.txt"}`), http.StatusOK).json(&read)
	if got, _ := base64.StdEncoding.DecodeString(read.ContentBase64); string(got) != "hello from the API\n" {
		t.Errorf("after bob's attempts, in.txt holds %q", got)
	}
}

// TestSessionFilesRefused: the hostile and invalid requests of the files
// operations get 404 or 422, and change nothing outside the workspace.
func TestSessionFilesRefused(t *testing.T) {
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	root := t.TempDir()
	e := newFilesEnv(t, openSQLite(t), root, model)
	id := e.create(keyAlice, `{"agent":"worker"}`)
	base := "/api/v2/sessions/" + id + "/files/"
	e.expect(e.do("POST", base+"write_file", keyAlice, map[string]string{"path": "a.txt", "content_base64": b64("a")}), http.StatusOK)
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("the key"), 0o600); err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "*"))
	if len(dirs) != 1 {
		t.Fatalf("workspaces: %v", dirs)
	}
	if err := os.Symlink(outside, filepath.Join(dirs[0], "link")); err != nil {
		t.Fatal(err)
	}
	// A name that is not UTF-8 cannot be named through JSON: a body with
	// the raw byte is refused (not UTF-8), and the escape \udcff decodes
	// to U+FFFD, which names another file.
	if err := os.WriteFile(filepath.Join(dirs[0], "bad-\xff"), []byte("unreachable"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op, body string
		status   int
	}{
		{"read_file", `{"path":"../../x"}`, 422},
		{"read_file", `{"path":"` + outside + `"}`, 422},
		{"read_file", `{"path":"link"}`, 422},
		{"read_file", `{"path":"."}`, 422},
		{"read_file", `{"path":"missing.txt"}`, 404},
		{"read_file", `{}`, 422},
		{"read_file", `{"path":7}`, 422},
		{"read_file", `not json`, 422},
		{"write_file", `{"path":"link","content_base64":"eA=="}`, 422},
		{"write_file", `{"path":"../escape.txt","content_base64":"eA=="}`, 422},
		{"write_file", `{"path":"b.txt","content_base64":"not base64!"}`, 422},
		{"write_file", `{"path":"b.txt"}`, 422},
		{"write_file", `{"path":"a.txt/b.txt","content_base64":"eA=="}`, 422},
		{"list_files", `{"path":"../.."}`, 422},
		{"list_files", `{"path":"a.txt"}`, 422},
		{"list_files", `{"path":"nope"}`, 404},
		{"list_files", `{"max_entries":0}`, 422},
		{"read_file", "{\"path\":\"bad-\xff\"}", 422},
		{"read_file", `{"path":"bad-\udcff"}`, 404},
	} {
		r := e.do("POST", base+tc.op, keyAlice, tc.body)
		if r.status != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.op, tc.body, r.status, r.body, tc.status)
		}
		if strings.Contains(string(r.body), root) {
			t.Errorf("%s %s: the answer names the host's directory: %s", tc.op, tc.body, r.body)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "the key" {
		t.Errorf("the file outside holds %q", b)
	}
	// The listing leaves the name out: no caller could name it back.
	var l fileList
	e.expect(e.do("POST", base+"list_files", keyAlice, `{}`), http.StatusOK).json(&l)
	for _, f := range l.Files {
		if strings.HasPrefix(f.Name, "bad-") {
			t.Errorf("listed %q", f.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "escape.txt")); err == nil {
		t.Error("a write escaped the workspace")
	}
	// A body over the server's limit is 413, whatever it decodes to.
	big := `{"path":"big.bin","content_base64":"` + strings.Repeat("A", 6<<20) + `"}`
	e.expect(e.do("POST", base+"write_file", keyAlice, big), http.StatusRequestEntityTooLarge)
	// A path that is not a UUID is 422, an unknown session 404.
	e.expect(e.do("POST", "/api/v2/sessions/nope/files/read_file", keyAlice, `{"path":"a.txt"}`), http.StatusUnprocessableEntity)
	e.expect(e.do("POST", "/api/v2/sessions/6f1c2a0e-1b2c-4d3e-8f90-123456789abc/files/read_file", keyAlice, `{"path":"a.txt"}`), http.StatusNotFound)
}

// TestSessionFilesNotConfigured: without a workspaces directory, the
// files operations say so.
func TestSessionFilesNotConfigured(t *testing.T) {
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	e := newFilesEnv(t, openSQLite(t), "", model)
	id := e.create(keyAlice, `{"agent":{"name":"plain"}}`)
	r := e.expect(e.do("POST", "/api/v2/sessions/"+id+"/files/list_files", keyAlice, `{}`), http.StatusNotImplemented)
	if !strings.Contains(string(r.body), "--workdir") {
		t.Errorf("answer %s does not say what to do", r.body)
	}
}

// TestSessionFilesWorkspacesMade: a workspaces directory that does not
// exist yet is made at the first use, as the session's own file tools and
// a message's files make it; writing a file answered 404 "File not found".
func TestSessionFilesWorkspacesMade(t *testing.T) {
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	root := filepath.Join(t.TempDir(), "not", "yet")
	e := newFilesEnv(t, openSQLite(t), root, model)
	id := e.create(keyAlice, `{"agent":{"name":"plain"}}`)
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/files/write_file", keyAlice, map[string]string{"path": "a.txt", "content_base64": b64("made\n")}), http.StatusOK)
	name := strings.ReplaceAll(id, "-", "")
	if got, err := os.ReadFile(filepath.Join(root, name, "a.txt")); err != nil || string(got) != "made\n" {
		t.Errorf("a.txt = %q, %v", got, err)
	}
}

// TestSessionFilesTwoServers: two servers (two managers, as two replicas)
// on one store and one workspaces directory (a shared volume) serve the
// same files: what one writes, the other lists and reads.
func TestSessionFilesTwoServers(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var a, b store.Store
			if kind == "sqlite" {
				a = openSQLite(t)
				b = a // the file admits one process: two managers share it
			} else {
				dsn := postgrestest.DSN(t)
				for _, p := range []*store.Store{&a, &b} {
					st, err := postgres.Open(t.Context(), dsn, &postgres.Options{MaxConns: 4})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { st.Close() })
					*p = st
				}
			}
			model := openaitest.NewServer()
			t.Cleanup(model.Close)
			root := t.TempDir()
			ea, eb := newFilesEnv(t, a, root, model), newFilesEnv(t, b, root, model)
			id := ea.create(keyAlice, `{"agent":{"name":"plain"}}`)
			base := "/api/v2/sessions/" + id + "/files/"
			ea.expect(ea.do("POST", base+"write_file", keyAlice, map[string]string{"path": "shared/notes.md", "content_base64": b64("# from replica A")}), http.StatusOK)
			var read struct {
				ContentBase64 string `json:"content_base64"`
			}
			eb.expect(eb.do("POST", base+"read_file", keyAlice, `{"path":"shared/notes.md"}`), http.StatusOK).json(&read)
			if got, _ := base64.StdEncoding.DecodeString(read.ContentBase64); string(got) != "# from replica A" {
				t.Errorf("replica B read %q", got)
			}
			eb.expect(eb.do("POST", base+"write_file", keyAlice, map[string]string{"path": "shared/notes.md", "content_base64": b64("# from replica B")}), http.StatusOK)
			var l fileList
			ea.expect(ea.do("POST", base+"list_files", keyAlice, `{"path":"shared"}`), http.StatusOK).json(&l)
			if len(l.Files) != 1 || l.Files[0].SizeBytes != int64(len("# from replica B")) {
				t.Errorf("replica A lists %+v", l)
			}
			eb.expect(eb.do("POST", base+"read_file", keyBob, `{"path":"shared/notes.md"}`), http.StatusNotFound)
		})
	}
}
