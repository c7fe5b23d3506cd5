package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// filesEnv is a server whose sessions keep workspaces in a directory
// (the test's), with the scripted OpenAI model; allow opens addresses to
// the fetching of URL files.
func filesEnv(t *testing.T, allow func(netip.AddrPort) bool, replies ...openaitest.Reply) (*env, string) {
	t.Helper()
	return filesEnvWith(t, &session.Options{FileFetchAllow: allow}, "", replies...)
}

// filesEnvWith is filesEnv with the manager's options o (its Workspaces
// and PublicURL set here) and the server's public address publicURL.
func filesEnvWith(t *testing.T, o *session.Options, publicURL string, replies ...openaitest.Reply) (*env, string) {
	t.Helper()
	model := openaitest.NewServer(replies...)
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := filepath.Join(t.TempDir(), "sessions")
	o.Workspaces, o.PublicURL = dir, publicURL
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, o)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, Workspaces: dir, PublicURL: publicURL})))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &env{t: t, model: model, url: srv.URL, st: st}, dir
}

var (
	tinyPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")
	tinyPDF = []byte("%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")
)

type attachment struct {
	Origin    string `json:"origin"`
	Name      string `json:"name"`
	Path      string `json:"path"`
	MediaType string `json:"media_type"`
	SizeBytes int64  `json:"size_bytes"`
	URL       string `json:"url"`
}

// TestMessageFiles: files given with the first message and with a later
// one are saved in the session's workspace under files/, reported by an
// AttachmentEvent each (after their message_event), downloadable at the
// event's URL, shown to the model (where they are; images and PDFs as
// media), and the stored request shows them as URLs, not their bytes.
func TestMessageFiles(t *testing.T) {
	notes := []byte("order 4242: shipped\n")
	remote := []byte("remote,data\n1,2\n")
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(remote)
	}))
	defer files.Close()
	filesAddr := netip.MustParseAddrPort(strings.TrimPrefix(files.URL, "http://"))
	e, dir := filesEnv(t, func(a netip.AddrPort) bool { return a == filesAddr },
		openaitest.Reply{Text: "read them"}, openaitest.Reply{Text: "and that one"})

	body := fmt.Sprintf(`{"agent":{"name":"reader","environments":[]},"idle_timeout_s":60,"messages":{"message":"Read these.","files":[
		{"type":"base64","source":%q,"name":"pixel.png"},
		{"type":"base64","source":%q,"name":"spec.pdf","media_type":"application/pdf","size_bytes":%d},
		{"source":%q,"name":"notes.txt"},
		{"type":"url","source":%q,"name":"data.csv"}]}}`, b64(string(tinyPNG)), b64(string(tinyPDF)), len(tinyPDF), b64(string(notes)), files.URL+"/data.csv")
	id := e.create(keyAlice, body)
	f := e.follow(keyAlice, id)
	f.status(session.StatusIdle)

	ws := filepath.Join(dir, strings.ReplaceAll(id, "-", ""))
	for name, want := range map[string][]byte{"pixel.png": tinyPNG, "spec.pdf": tinyPDF, "notes.txt": notes, "data.csv": remote} {
		got, err := os.ReadFile(filepath.Join(ws, "files", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("files/%s: %q, %v; want %q", name, got, err, want)
		}
	}

	var atts []attachment
	var order []string
	for _, ev := range f.events {
		order = append(order, ev.Type)
		if ev.Type == "AttachmentEvent" {
			var a attachment
			json.Unmarshal(ev.Data, &a)
			atts = append(atts, a)
		}
	}
	if strings.Join(order[:5], " ") != "AgentEvent AttachmentEvent AttachmentEvent AttachmentEvent AttachmentEvent" {
		t.Errorf("events start %v, want the message_event, then an AttachmentEvent per file", order)
	}
	want := []attachment{
		{"user", "pixel.png", "files/pixel.png", "image/png", int64(len(tinyPNG)), "/api/v2/sessions/" + id + "/resources/files/files/pixel.png"},
		{"user", "spec.pdf", "files/spec.pdf", "application/pdf", int64(len(tinyPDF)), "/api/v2/sessions/" + id + "/resources/files/files/spec.pdf"},
		{"user", "notes.txt", "files/notes.txt", "text/plain; charset=utf-8", int64(len(notes)), "/api/v2/sessions/" + id + "/resources/files/files/notes.txt"},
		{"user", "data.csv", "files/data.csv", "text/csv; charset=utf-8", int64(len(remote)), "/api/v2/sessions/" + id + "/resources/files/files/data.csv"},
	}
	if fmt.Sprint(atts) != fmt.Sprint(want) {
		t.Errorf("attachments\n%v\nwant\n%v", atts, want)
	}
	r := e.expect(e.do("GET", atts[1].URL, keyAlice, nil), http.StatusOK)
	if !bytes.Equal(r.body, tinyPDF) {
		t.Errorf("GET %s: %q", atts[1].URL, r.body)
	}

	// What the model got: where the files are, the image and the PDF.
	req := string(e.model.Requests()[0].Body)
	for _, s := range []string{"files/pixel.png", "files/spec.pdf", "files/notes.txt (text/plain; charset=utf-8, 20 bytes)", "files/data.csv",
		`"image_url":{"url":"data:image/png;base64,` + b64(string(tinyPNG)), `"file_data":"data:application/pdf;base64,` + b64(string(tinyPDF))} {
		if !strings.Contains(req, s) {
			t.Errorf("the model's request lacks %s:\n%s", s, req)
		}
	}
	// The stored request: URLs, not bytes.
	r = e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK)
	if strings.Contains(string(r.body), b64(string(tinyPDF))) || !strings.Contains(string(r.body), `"type":"url","source":"`+atts[1].URL+`"`) {
		t.Errorf("stored request: %s", r.body)
	}

	// A later message with a file of a name already taken.
	msg := fmt.Sprintf(`{"message":"One more.","files":[{"source":%q,"name":"notes.txt"}]}`, b64("v2"))
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, msg), http.StatusAccepted)
	f.until(func(c *changes) bool { return c.Status == session.StatusIdle && len(e.model.Requests()) == 2 })
	if got, err := os.ReadFile(filepath.Join(ws, "files", "notes (2).txt")); err != nil || string(got) != "v2" {
		t.Errorf("files/notes (2).txt: %q, %v", got, err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "files", "notes.txt")); !bytes.Equal(got, notes) {
		t.Errorf("the first notes.txt changed: %q", got)
	}
	if !strings.Contains(string(e.model.Requests()[1].Body), "files/notes (2).txt") {
		t.Errorf("the second request does not name files/notes (2).txt")
	}
	// Another key's session: not found, nothing written.
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyBob, msg), http.StatusNotFound)
	if _, err := os.Stat(filepath.Join(ws, "files", "notes (3).txt")); err == nil {
		t.Error("another key's message wrote a file")
	}
}

// TestMessageFilesRefused: bad names, too many files, too many bytes, a
// size that lies, bad base64, an unknown type and URLs the address policy
// refuses are answered 422 (or 413) at the file's place; no session is
// made and nothing is written.
func TestMessageFilesRefused(t *testing.T) {
	e, dir := filesEnv(t, nil)
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("secret")) }))
	defer local.Close()
	file := func(name string) string { return fmt.Sprintf(`{"source":%q,"name":%q}`, b64("x"), name) }
	many := make([]string, 11)
	for i := range many {
		many[i] = file(fmt.Sprintf("f%d.txt", i))
	}
	big := b64(string(make([]byte, 3_600_000)))
	for _, tt := range []struct {
		name, files string
		status      int
		loc, msg    string
	}{
		{"traversal", file("../../etc/passwd"), 422, "body.messages.0.files.0.name", "no directory"},
		{"directory", file("a/b.txt"), 422, "body.messages.0.files.0.name", "no directory"},
		{"backslash", file(`..\b.txt`), 422, "body.messages.0.files.0.name", "no directory"},
		{"dot dot", file(".."), 422, "body.messages.0.files.0.name", "is not a file's name"},
		{"hidden", file(".bashrc"), 422, "body.messages.0.files.0.name", "may not start with '.'"},
		{"control", `{"source":"eA==","name":"a\u0001b"}`, 422, "body.messages.0.files.0.name", "may not hold"},
		{"bidi", file("a\u202egpj.exe"), 422, "body.messages.0.files.0.name", "may not hold"},
		{"no name", `{"source":"eA=="}`, 422, "body.messages.0.files.0.name", "Field required"},
		{"too many", strings.Join(many, ","), 422, "body.messages.0.files", "at most 10 files"},
		{"too large", fmt.Sprintf(`{"source":%q,"name":"a.bin"},{"source":%q,"name":"b.bin"}`, big, big), 413, "", "files too large"},
		{"size lies", fmt.Sprintf(`{"source":%q,"name":"a.txt","size_bytes":5}`, b64("x")), 422, "body.messages.0.files.0.size_bytes", "the file has 1 bytes"},
		{"bad base64", `{"source":"!!!","name":"a.txt"}`, 422, "body.messages.0.files.0.source", "not standard base64"},
		{"bad type", `{"type":"s3","source":"x","name":"a.txt"}`, 422, "body.messages.0.files.0.type", "'base64' or 'url'"},
		{"bad media type", `{"source":"eA==","name":"a.txt","media_type":"no type"}`, 422, "body.messages.0.files.0.media_type", "not a MIME type"},
		{"loopback URL", fmt.Sprintf(`{"type":"url","source":%q,"name":"a.txt"}`, local.URL+"/a"), 422, "body.messages.0.files.0.source", "not on the public internet"},
		// A name: the caller is not told the address it resolved to.
		{"loopback name", fmt.Sprintf(`{"type":"url","source":%q,"name":"a.txt"}`, strings.Replace(local.URL, "127.0.0.1", "localhost", 1)+"/a"), 422, "body.messages.0.files.0.source", "not on the public internet"},
		{"metadata URL", `{"type":"url","source":"http://169.254.169.254/latest/meta-data","name":"a.txt"}`, 422, "body.messages.0.files.0.source", "not on the public internet"},
		{"file URL", `{"type":"url","source":"file:///etc/passwd","name":"a.txt"}`, 422, "body.messages.0.files.0.source", "only http and https"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"agent":{"name":"reader","environments":[]},"messages":{"message":"hi","files":[` + tt.files + `]}}`
			r := e.expect(e.do("POST", "/api/v2/sessions", keyAlice, body), tt.status)
			if tt.loc != "" && !hasDetail(r.body, tt.loc, tt.msg) || tt.loc == "" && !strings.Contains(string(r.body), tt.msg) {
				t.Errorf("%d %s, want %s: %s", r.status, r.body, tt.loc, tt.msg)
			}
			if tt.name == "loopback name" && (strings.Contains(string(r.body), "127.0.0.1") || strings.Contains(string(r.body), "::1")) {
				t.Errorf("the refusal of a name shows the address it resolved to: %s", r.body)
			}
		})
	}
	var page struct{ Total int }
	e.expect(e.do("GET", "/api/v2/sessions", keyAlice, nil), http.StatusOK).json(&page)
	if page.Total != 0 {
		t.Errorf("%d sessions made by refused requests", page.Total)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused requests wrote %v", entries)
	}

	// The same on POST .../messages: nothing of the batch is taken.
	id := e.create(keyAlice, `{"agent":{"name":"reader","environments":[]}}`)
	batch := fmt.Sprintf(`{"type":"batch","messages":[{"message":"ok","files":[%s]},{"message":"bad","files":[%s]}]}`, file("fine.txt"), file("../x"))
	r := e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, batch), http.StatusUnprocessableEntity)
	if !hasDetail(r.body, "body.messages.1.files.0.name", "no directory") {
		t.Errorf("422 %s", r.body)
	}
	if _, err := os.Stat(filepath.Join(dir, strings.ReplaceAll(id, "-", ""), "files", "fine.txt")); err == nil {
		t.Error("a refused batch saved its first file")
	}
}

// TestMessageFilesNeedWorkspaces: a server without session files refuses
// files, saying why.
func TestMessageFilesNeedWorkspaces(t *testing.T) {
	e := newEnv(t, nil)
	r := e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[]},"messages":{"message":"hi","files":[{"source":"eA==","name":"a.txt"}]}}`), http.StatusUnprocessableEntity)
	if !hasDetail(r.body, "body.messages.0.files", "keeps no session files") {
		t.Errorf("422 %s", r.body)
	}
}

// TestMessageFilesIdempotent: a creation retried with its Idempotency-Key
// returns the first session and leaves no second workspace behind.
func TestMessageFilesIdempotent(t *testing.T) {
	e, dir := filesEnv(t, nil, openaitest.Reply{Text: "ok"})
	body := fmt.Sprintf(`{"agent":{"name":"reader","environments":[]},"messages":{"message":"hi","files":[{"source":%q,"name":"a.txt"}]}}`, b64("x"))
	id := e.create(keyAlice, body, "Idempotency-Key", "k-1")
	again := e.create(keyAlice, body, "Idempotency-Key", "k-1")
	if again != id {
		t.Fatalf("the retry made %s, want %s", again, id)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != strings.ReplaceAll(id, "-", "") {
		t.Errorf("workspaces %v, want only the session's", entries)
	}
}

// TestAttachmentURLAbsolute: with the server's public address configured
// (server.Options.PublicURL and session.Options.PublicURL, hrns serve
// --public-url), an AttachmentEvent's url, and the url the stored request
// shows, are absolute URLs under it, which serve the file to its own key
// only; without one they are paths from the server's root
// (TestMessageFiles).
func TestAttachmentURLAbsolute(t *testing.T) {
	const public = "https://hrns.example.com/agents"
	e, _ := filesEnvWith(t, &session.Options{}, public+"/", openaitest.Reply{Text: "ok"})
	body := fmt.Sprintf(`{"agent":{"name":"reader","environments":[]},"idle_timeout_s":60,"messages":{"message":"Read.","files":[{"source":%q,"name":"my notes.txt"}]}}`, b64("hello"))
	id := e.create(keyAlice, body)
	f := e.follow(keyAlice, id)
	f.status(session.StatusIdle)
	var a attachment
	for _, ev := range f.events {
		if ev.Type == "AttachmentEvent" {
			json.Unmarshal(ev.Data, &a)
		}
	}
	want := public + "/api/v2/sessions/" + id + "/resources/files/files/my%20notes.txt"
	if a.URL != want {
		t.Fatalf("url %q, want %q", a.URL, want)
	}
	r := e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK)
	if !strings.Contains(string(r.body), `"source":"`+want+`"`) {
		t.Errorf("the stored request does not show %s: %s", want, r.body)
	}
	path := strings.TrimPrefix(a.URL, public)
	if r := e.expect(e.do("GET", path, keyAlice, nil), http.StatusOK); string(r.body) != "hello" {
		t.Errorf("GET %s: %q", path, r.body)
	}
	e.expect(e.do("GET", path, keyBob, nil), http.StatusNotFound)
	e.expect(e.do("GET", path, "", nil), http.StatusUnauthorized)
}

// TestAgentAttachments: files a session's agent leaves in its files
// folder (here a tool of the session's environment, which gets the
// folder as EnvironmentParams.Files, as the browser does for its
// downloads) are reported by AttachmentEvents of origin "agent" after
// the call's result: new files, and a file written again; not the
// user's files, nor hidden files, names with control characters, links
// (one to a file outside), nor files unchanged. At most 10 with
// one call's result, the rest with the next. Their url serves the file
// to the session's key only.
func TestAgentAttachments(t *testing.T) {
	type makeArgs struct {
		Names []string `json:"names"`
		Text  string   `json:"text"`
	}
	web := func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
		ts := &loop.Toolset{}
		ts.Add(loop.NewTool("make_files", "Writes files.", func(ctx context.Context, in makeArgs) (*loop.Output, error) {
			if p.Files == "" {
				return nil, fmt.Errorf("no files folder")
			}
			os.MkdirAll(p.Files, 0o700)
			for _, n := range in.Names {
				if target, ok := strings.CutPrefix(n, "link:"); ok {
					// A link to a file outside the folder.
					if err := os.Symlink(target, filepath.Join(p.Files, "link.txt")); err != nil {
						return nil, err
					}
					continue
				}
				if err := os.WriteFile(filepath.Join(p.Files, n), []byte(in.Text), 0o600); err != nil {
					return nil, err
				}
			}
			return loop.TextOutput("written"), nil
		}))
		return ts, nil, nil
	}
	secret := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(secret, []byte("not for the user"), 0o600)
	var many []string
	for i := range 12 {
		many = append(many, fmt.Sprintf("part-%02d.csv", i))
	}
	call := func(id string, names []string, text string) openaitest.Reply {
		args, _ := json.Marshal(makeArgs{names, text})
		return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall(id, "make_files", string(args))}}
	}
	e, _ := filesEnvWith(t, &session.Options{SessionEnvironments: map[string]session.EnvironmentFunc{"web": web}}, "",
		call("c1", []string{"report.pdf", ".hidden", "notes.txt", "bell\x07.txt", "link:" + secret}, "v1"),
		call("c2", []string{"report.pdf"}, "version 2"),
		call("c3", many, "x"),
		call("c4", []string{}, ""),
		openaitest.Reply{Text: "done"})
	body := fmt.Sprintf(`{"agent":{"name":"maker","environments":["web"]},"messages":{"message":"Make files.","files":[{"source":%q,"name":"input.txt"}]}}`, b64("given"))
	id := e.create(keyAlice, body)
	f := e.follow(keyAlice, id)
	f.status(session.StatusCompleted)
	var got []string
	var first attachment
	for _, ev := range f.events {
		if ev.Type != "AttachmentEvent" {
			continue
		}
		var a attachment
		json.Unmarshal(ev.Data, &a)
		if a.Origin == "agent" && first.Name == "" {
			first = a
		}
		got = append(got, fmt.Sprintf("%s %s %s %s %d", a.Origin, a.Name, a.Path, a.MediaType, a.SizeBytes))
	}
	want := []string{"user input.txt files/input.txt text/plain; charset=utf-8 5",
		"agent notes.txt files/notes.txt text/plain; charset=utf-8 2",
		"agent report.pdf files/report.pdf application/pdf 2",
		"agent report.pdf files/report.pdf application/pdf 9"}
	for _, n := range many {
		want = append(want, "agent "+n+" files/"+n+" text/csv; charset=utf-8 1")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("attachments:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// At most 10 with one call's result: the third call's commit carries
	// 10, the fourth the other 2.
	perResult, counts := 0, []int{}
	for _, ev := range f.events {
		switch {
		case ev.Type == "AttachmentEvent" && strings.Contains(string(ev.Data), `"agent"`):
			perResult++
		case ev.Type == "AgentEvent" && strings.Contains(string(ev.Data), `"tool_result"`):
			if perResult > 0 {
				counts = append(counts, perResult)
			}
			perResult = 0
		}
	}
	counts = append(counts, perResult)
	if fmt.Sprint(counts) != "[2 1 10 2]" {
		t.Errorf("agent attachments after each call: %v, want [2 1 10 2]", counts)
	}
	if want := "/api/v2/sessions/" + id + "/resources/files/files/notes.txt"; first.URL != want {
		t.Errorf("url %q, want %q", first.URL, want)
	}
	if r := e.expect(e.do("GET", first.URL, keyAlice, nil), http.StatusOK); string(r.body) != "v1" {
		t.Errorf("GET %s: %q", first.URL, r.body)
	}
	e.expect(e.do("GET", first.URL, keyBob, nil), http.StatusNotFound)
}
