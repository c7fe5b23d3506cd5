package server_test

import (
	"archive/zip"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// zipOf is a zip archive of the named files.
func zipOf(t *testing.T, files ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := 0; i+1 < len(files); i += 2 {
		w, err := zw.Create(files[i])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(files[i+1]))
	}
	zw.Close()
	return buf.Bytes()
}

// TestUIBrowserProfiles: the page manages the key's browser profiles, in
// a headless Chromium: it uploads one (initiate, the form to the upload
// target, complete) whose name is hostile markup with a bidi override
// (shown as text, escaped: nothing of it runs or becomes an element), a
// hostile archive is refused with the server's reason and leaves no
// profile, one is made the default and not, a session started from the
// form with the profile chosen gets it (its web environment is given the
// profile), and a profile is deleted after a second click. Another key
// sees none of it.
func TestUIBrowserProfiles(t *testing.T) {
	model := openaitest.NewServer(openaitest.Reply{Text: "ok"}, openaitest.Reply{Text: "ok"})
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	given := map[string]string{} // session: the profile its environment got
	web := func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
		if p.Session != "" {
			mu.Lock()
			given[p.Session] = ""
			if p.Profile != nil {
				given[p.Session] = p.Profile.ID
			}
			mu.Unlock()
		}
		return &loop.Toolset{}, nil, nil
	}
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		SessionEnvironments: map[string]session.EnvironmentFunc{"web": web},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(uiPrefix+"/", http.StripPrefix(uiPrefix, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}})))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	e := &env{t: t, model: model, url: srv.URL + uiPrefix, st: st}
	e.expect(e.do("POST", "/api/v2/environments", keyAlice, `{"id":"my-web","kind":"web"}`), http.StatusCreated)
	e.expect(e.do("POST", "/api/v2/agents", keyAlice, `{"name":"surfer","description":"Browses.","environments":[{"id":"my-web"}]}`), http.StatusCreated)

	dir := t.TempDir()
	good := filepath.Join(dir, "profile.zip")
	bad := filepath.Join(dir, "bad.zip")
	os.WriteFile(good, zipOf(t, "Local State", "{}", "Default/Cookies", "jar"), 0o600)
	os.WriteFile(bad, zipOf(t, "Local State", "{}", "../../escape", "x"), 0o600)
	const hostileName = `<img src=x onerror="window.pwned=1">` + "\u202egnp.exe"

	b := newUIBrowser(t)
	b.login(e)
	rows := func(n int) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`document.querySelectorAll('#profile-items tr').length === ` + string(rune('0'+n)))
	}
	var refused string
	b.step("a hostile archive",
		chromedp.Navigate(e.url+"/ui/#/manage/profiles"),
		chromedp.WaitVisible(chromedp.CSS(`#profile-form`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#profiles-info').textContent === '0 browser profiles'`),
		chromedp.SendKeys(chromedp.CSS(`#profile-name`), "bad"),
		chromedp.SetUploadFiles(chromedp.CSS(`#profile-file`), []string{bad}),
		chromedp.Click(chromedp.CSS(`#profile-upload`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#profile-error').textContent !== ''`),
		eval(`document.querySelector('#profile-error').textContent`, &refused),
	)
	if !strings.Contains(refused, "Not uploaded") || !strings.Contains(refused, "a path leaving the profile") {
		t.Errorf("a hostile archive: %q", refused)
	}
	var shown, cellHTML string
	var pwned bool
	b.step("upload",
		chromedp.SetValue(chromedp.CSS(`#profile-name`), hostileName),
		chromedp.SetUploadFiles(chromedp.CSS(`#profile-file`), []string{good}),
		chromedp.Click(chromedp.CSS(`#profile-upload`)),
		rows(1),
		eval(`document.querySelector('#profile-items .profile-name').textContent`, &shown),
		eval(`document.querySelector('#profile-items .profile-name').innerHTML`, &cellHTML),
		eval(`!!window.pwned || document.querySelector('#profile-items img') !== null`, &pwned),
	)
	if pwned || strings.Contains(cellHTML, "<img") || shown != `<img src=x onerror="window.pwned=1">\u202egnp.exe` {
		t.Errorf("the hostile name: shown %q (HTML %q), ran %v", shown, cellHTML, pwned)
	}
	var list struct {
		Total    int `json:"total"`
		Profiles []struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			IsDefault bool   `json:"is_default"`
		} `json:"profiles"`
	}
	e.expect(e.do("GET", "/api/v2/browser-profiles", keyAlice, nil), http.StatusOK).json(&list)
	if list.Total != 1 || list.Profiles[0].Name != hostileName {
		t.Fatalf("profiles after the uploads: %+v", list)
	}
	id := list.Profiles[0].ID
	var other struct{ Total int }
	e.expect(e.do("GET", "/api/v2/browser-profiles", keyBob, nil), http.StatusOK).json(&other)
	if other.Total != 0 {
		t.Errorf("another key sees %d profiles", other.Total)
	}

	b.step("make it the default",
		chromedp.Click(chromedp.CSS(`#profile-items tr[data-id="`+id+`"] button.default`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#profile-items tr[data-id="`+id+`"]').dataset.default === '1'`),
	)
	e.expect(e.do("GET", "/api/v2/browser-profiles/default?browser_name=chromium", keyAlice, nil), http.StatusOK)

	// A session from the form, with the profile chosen.
	var hash string
	b.step("start with the profile",
		chromedp.Navigate(e.url+"/ui/#/"),
		chromedp.Poll[chromedp.Void](`document.querySelector('#new-agent option[value="surfer"]') !== null && document.querySelector('#new-profile option[value="`+id+`"]') !== null`),
		chromedp.SetValue(chromedp.CSS(`#new-agent`), "surfer"),
		chromedp.SetValue(chromedp.CSS(`#new-profile`), id),
		chromedp.SendKeys(chromedp.CSS(`#new-message`), "browse"),
		chromedp.Click(chromedp.CSS(`#new-start`)),
		chromedp.Poll[chromedp.Void](`location.hash.startsWith('#/s/')`),
		eval(`location.hash`, &hash),
	)
	sid := strings.TrimPrefix(hash, "#/s/")
	e.follow(keyAlice, sid).status(session.StatusCompleted)
	mu.Lock()
	got, ran := given[sid]
	mu.Unlock()
	if !ran || got != id {
		t.Errorf("the session's web environment got profile %q (ran %v), want %s", got, ran, id)
	}

	b.step("unset the default, then delete",
		chromedp.Navigate(e.url+"/ui/#/manage/profiles"),
		rows(1),
		chromedp.Click(chromedp.CSS(`#profile-items tr[data-id="`+id+`"] button.default`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#profile-items tr[data-id="`+id+`"]').dataset.default === ''`),
		chromedp.Click(chromedp.CSS(`#profile-items tr[data-id="`+id+`"] button.danger`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#profile-items button.danger').textContent === 'Delete? Click again'`),
		chromedp.Click(chromedp.CSS(`#profile-items tr[data-id="`+id+`"] button.danger`)),
		rows(0),
	)
	e.expect(e.do("GET", "/api/v2/browser-profiles/"+id, keyAlice, nil), http.StatusNotFound)
}
