package cli

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// cookieSite sets a persistent cookie on /set, and shows (and records)
// the cookies a browser sends to /check, where it sets another.
type cookieSite struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // the Cookie headers of /check
}

func newCookieSite(t *testing.T) *cookieSite {
	s := &cookieSite{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /set", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "pref", Value: "dark42", Path: "/", MaxAge: 30 * 24 * 3600})
		fmt.Fprint(w, `<!doctype html><title>Set</title><p>cookie set</p>`)
	})
	mux.HandleFunc("GET /check", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Get("Cookie"))
		s.mu.Unlock()
		// A cookie the session's browser gets: it must not reach the
		// stored profile.
		http.SetCookie(w, &http.Cookie{Name: "visited", Value: "yes", Path: "/", MaxAge: 3600})
		c := r.Header.Get("Cookie")
		if c == "" {
			c = "none"
		}
		fmt.Fprintf(w, `<!doctype html><title>Check</title><h1>Cookies: [%s]</h1>`, c)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *cookieSite) cookies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.seen...)
}

// buildUserData runs Chromium once, headless, on its own user-data
// directory against url (which sets a persistent cookie), and returns
// the directory once Chromium has exited and written its cookies.
func buildUserData(t *testing.T, url string) string {
	t.Helper()
	chromium, err := browser.FindChromium()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "user-data")
	args := []string{"--headless", "--user-data-dir=" + dir, "--password-store=basic", "--use-mock-keychain",
		"--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-extensions", "--dump-dom", url}
	if os.Geteuid() == 0 {
		args = append([]string{"--no-sandbox"}, args...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, args...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("cookie set")) {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "Default", "Cookies")); err != nil {
		t.Fatalf("chromium wrote no cookies: %v", err)
	}
	return dir
}

// zipDir archives the contents of dir (regular files and directories;
// Chromium's lock links, if any were left, are not part of a profile).
func zipDir(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			_, err := zw.Create(rel + "/")
			return err
		case !d.Type().IsRegular():
			return nil
		}
		w, err := zw.Create(rel)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

// api sends a JSON request to hrns serve with the key.
func api(t *testing.T, method, url, key, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, url, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// uploadBrowserProfile initiates, uploads and completes a profile.
func uploadBrowserProfile(t *testing.T, base, key string, archive []byte) string {
	t.Helper()
	code, b := api(t, "POST", base+"/api/v2/browser-profiles/initiate-upload", key, "")
	var init struct {
		ProfileID    string            `json:"profile_id"`
		UploadURL    string            `json:"upload_url"`
		UploadFields map[string]string `json:"upload_fields"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &init) != nil {
		t.Fatalf("initiate-upload: %d %s", code, b)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	for k, v := range init.UploadFields {
		mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("file", "profile.zip")
	fw.Write(archive)
	mw.Close()
	resp, err := http.Post(init.UploadURL, mw.FormDataContentType(), &form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("upload: %d", resp.StatusCode)
	}
	code, b = api(t, "POST", base+"/api/v2/browser-profiles/"+init.ProfileID+"/complete-upload", key,
		`{"name":"shop","browser_name":"chromium","browser_version":"test"}`)
	if code != http.StatusCreated {
		t.Fatalf("complete-upload: %d %s", code, b)
	}
	return init.ProfileID
}

var cookiesRE = regexp.MustCompile(`Cookies: \[([^\]]*)\]`)

// TestServeBrowserProfile: a Chromium user-data directory made by a real
// Chromium (which a loopback site gave a persistent cookie) is archived
// and uploaded; a hrns serve session whose web environment names it (by
// id, then as the key's default) gets a browser that sends the cookie.
// What a session's browser changes (a new cookie) is not written back
// without persist_browser_profile,
// a session without the profile sends no cookie, and another key cannot
// use the profile. hrns run --browser-profile starts its browser from
// the same archive.
func TestServeBrowserProfile(t *testing.T) {
	needChromium(t)
	t.Parallel()
	site := newCookieSite(t)
	archive := zipDir(t, buildUserData(t, site.URL+"/set"))

	visit := openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_nav", "browser_navigate", fmt.Sprintf(`{"url":%q}`, site.URL+"/check"))}}
	answer := openaitest.Reply{Func: func(body []byte) openaitest.Reply {
		if m := cookiesRE.FindSubmatch(body); m != nil {
			return openaitest.Reply{Text: "cookies: " + string(m[1])}
		}
		return openaitest.Reply{Text: "no page"}
	}}
	model := openaitest.NewServer(visit, answer, visit, answer, visit, answer)
	defer model.Close()
	const keyA, keyB = "sk-profile-a", "sk-profile-b"
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": keyA + "," + keyB},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"),
		"--browser-allow", site.Listener.Addr().String(), "--browser-profiles", t.TempDir())
	id := uploadBrowserProfile(t, s.url, keyA, archive)

	run := func(key, env string) (string, error) {
		t.Helper()
		var e client.Environment
		if err := json.Unmarshal([]byte(env), &e); err != nil {
			t.Fatal(err)
		}
		c := client.New(s.url, key, nil)
		h, err := c.StartSession(t.Context(), &client.SessionRequest{
			Agent:    client.AgentRef{Inline: &client.Agent{Name: "checker", Environments: []client.Environment{e}}},
			Messages: client.Text("Which cookies does the site see?"),
		})
		if err != nil {
			return "", err
		}
		res, err := h.WaitForCompletion(t.Context())
		if err != nil || res.Status != session.StatusCompleted {
			t.Fatalf("%v %+v\n%s", err, res, s.logs.String())
		}
		return res.Answer, nil
	}

	// By id: the browser sends the profile's cookie.
	got, err := run(keyA, fmt.Sprintf(`{"kind":"web","headless":true,"browser_profile_id":%q}`, id))
	if err != nil {
		t.Fatal(err)
	}
	if got != "cookies: pref=dark42" {
		t.Fatalf("with the profile the site saw %q (requests: %q), want pref=dark42", got, site.cookies())
	}

	// Another key cannot name it.
	if _, err := run(keyB, fmt.Sprintf(`{"kind":"web","browser_profile_id":%q}`, id)); err == nil ||
		!strings.Contains(err.Error(), "browser profile "+id+" not found") {
		t.Fatalf("another key's profile: %v", err)
	}
	// Nor write its own session's browser back into it.
	if _, err := run(keyB, fmt.Sprintf(`{"kind":"web","browser_profile_id":%q,"persist_browser_profile":true}`, id)); err == nil ||
		!strings.Contains(err.Error(), "browser profile "+id+" not found") {
		t.Fatalf("another key's persist_browser_profile: %v", err)
	}

	// As the key's default: the same cookie, and not the one the first
	// session's browser was given (the stored profile is unchanged).
	if code, b := api(t, "PUT", s.url+"/api/v2/browser-profiles/"+id+"/default", keyA, ""); code != http.StatusOK {
		t.Fatalf("set default: %d %s", code, b)
	}
	if got, err = run(keyA, `{"kind":"web","headless":true,"use_default_browser_profile":true}`); err != nil {
		t.Fatal(err)
	}
	if got != "cookies: pref=dark42" {
		t.Fatalf("with the default profile the site saw %q, want only pref=dark42", got)
	}

	// Without a profile, no cookie: the cookie came from the profile.
	if got, err = run(keyA, `{"kind":"web","headless":true}`); err != nil {
		t.Fatal(err)
	}
	if got != "cookies: none" {
		t.Fatalf("without a profile the site saw %q", got)
	}

	// hrns run --browser-profile: the same archive, the same cookie.
	zipFile := filepath.Join(t.TempDir(), "profile.zip")
	if err := os.WriteFile(zipFile, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	runModel := openaitest.NewServer(visit, answer)
	defer runModel.Close()
	var out, errOut bytes.Buffer
	exit := Run(t.Context(), []string{"run", "--base-url", runModel.URL(), "--model", "m", "--tools", "none", "--no-skills",
		"--workdir", t.TempDir(), "--browser", "--browser-allow", site.Listener.Addr().String(), "--browser-profile", zipFile, "Which cookies?"},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if exit != ExitOK || !strings.Contains(out.String(), "cookies: pref=dark42") {
		t.Fatalf("hrns run --browser-profile: exit %d\nstdout: %s\nstderr: %s", exit, out.String(), errOut.String())
	}
	// A hostile archive is refused before anything runs.
	bad := filepath.Join(t.TempDir(), "bad.zip")
	var hostile bytes.Buffer
	zw := zip.NewWriter(&hostile)
	zw.Create("Local State")
	zw.Create("../../escape")
	zw.Close()
	os.WriteFile(bad, hostile.Bytes(), 0o600)
	errOut.Reset()
	exit = Run(t.Context(), []string{"run", "--base-url", runModel.URL(), "--model", "m", "--tools", "none", "--no-skills",
		"--browser", "--browser-profile", bad, "x"}, &IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if exit != ExitUsage || !strings.Contains(errOut.String(), "a path leaving the profile") {
		t.Fatalf("a hostile --browser-profile: exit %d: %s", exit, errOut.String())
	}

	code, b := api(t, "GET", s.url+"/api/v2/browser-profiles/"+id, keyA, "")
	var p struct {
		UsageCount int        `json:"usage_count"`
		LastUsedAt *time.Time `json:"last_used_at"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &p) != nil || p.UsageCount != 2 || p.LastUsedAt == nil {
		t.Errorf("the profile after two sessions: %d %s", code, b)
	}
}

// profileOf reads a profile's checksum and update time.
func profileOf(t *testing.T, base, key, id string) (checksum string, updated time.Time) {
	t.Helper()
	code, b := api(t, "GET", base+"/api/v2/browser-profiles/"+id, key, "")
	var p struct {
		Checksum  string    `json:"checksum"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &p) != nil {
		t.Fatalf("GET the profile: %d %s", code, b)
	}
	return p.Checksum, p.UpdatedAt
}

// TestServeBrowserProfilePersist: a session whose web environment says
// persist_browser_profile writes its browser back into the profile when
// its run stops: a real Chromium given a new cookie in session 1, a
// second session from the same profile (without persist) sends it, and
// leaves the profile as it was. persist_browser_profile without a profile
// to write is 422.
func TestServeBrowserProfilePersist(t *testing.T) {
	needChromium(t)
	t.Parallel()
	site := newCookieSite(t)
	archive := zipDir(t, buildUserData(t, site.URL+"/set"))
	visit := openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_nav", "browser_navigate", fmt.Sprintf(`{"url":%q}`, site.URL+"/check"))}}
	answer := openaitest.Reply{Func: func(body []byte) openaitest.Reply {
		if m := cookiesRE.FindSubmatch(body); m != nil {
			return openaitest.Reply{Text: "cookies: " + string(m[1])}
		}
		return openaitest.Reply{Text: "no page"}
	}}
	model := openaitest.NewServer(visit, answer, visit, answer)
	defer model.Close()
	const key = "sk-persist"
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": key},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"),
		"--browser-allow", site.Listener.Addr().String(), "--browser-profiles", t.TempDir())
	id := uploadBrowserProfile(t, s.url, key, archive)
	run := func(env string) (string, error) {
		t.Helper()
		var e client.Environment
		if err := json.Unmarshal([]byte(env), &e); err != nil {
			t.Fatal(err)
		}
		h, err := client.New(s.url, key, nil).StartSession(t.Context(), &client.SessionRequest{
			Agent:    client.AgentRef{Inline: &client.Agent{Name: "checker", Environments: []client.Environment{e}}},
			Messages: client.Text("Which cookies does the site see?"),
		})
		if err != nil {
			return "", err
		}
		res, err := h.WaitForCompletion(t.Context())
		if err != nil || res.Status != session.StatusCompleted {
			t.Fatalf("%v %+v\n%s", err, res, s.logs.String())
		}
		return res.Answer, nil
	}
	if _, err := run(`{"kind":"web","persist_browser_profile":true}`); err == nil || !strings.Contains(err.Error(), "name one with browser_profile_id") {
		t.Fatalf("persist without a profile: %v", err)
	}
	sum0, at0 := profileOf(t, s.url, key, id)

	got, err := run(fmt.Sprintf(`{"kind":"web","headless":true,"browser_profile_id":%q,"persist_browser_profile":true}`, id))
	if err != nil || got != "cookies: pref=dark42" {
		t.Fatalf("session 1 saw %q, %v", got, err)
	}
	// The write-back follows the run's end: wait for it.
	var sum1 string
	deadline := time.Now().Add(time.Minute)
	for {
		var at1 time.Time
		if sum1, at1 = profileOf(t, s.url, key, id); sum1 != sum0 && at1.After(at0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the profile was not written back\n%s", s.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	got, err = run(fmt.Sprintf(`{"kind":"web","headless":true,"browser_profile_id":%q}`, id))
	if err != nil || !strings.Contains(got, "pref=dark42") || !strings.Contains(got, "visited=yes") {
		t.Fatalf("session 2 saw %q (%v), want the profile's cookie and the one session 1 got", got, err)
	}
	if sum2, _ := profileOf(t, s.url, key, id); sum2 != sum1 {
		t.Errorf("a session without persist_browser_profile changed the profile")
	}
}
