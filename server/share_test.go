package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestShareURLAbsolute: share_url is an absolute URL (issue 33, defect
// 4): from the configured public address, or the request's scheme and
// Host; and it opens the shared session.
func TestShareURLAbsolute(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, llmtest.NewModel(), nil)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	for _, tc := range []struct {
		name, public, proto string
		want                func(srv string) string
	}{
		{"the request's", "", "", func(srv string) string { return srv }},
		{"behind a TLS proxy", "", "https", func(srv string) string { return "https://" + strings.TrimPrefix(srv, "http://") }},
		{"configured", "https://hrns.example.com/agents/", "", func(string) string { return "https://hrns.example.com/agents" }},
	} {
		srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice}, PublicURL: tc.public})))
		e := &env{t: t, url: srv.URL, st: st}
		id := e.create(keyAlice, `{"agent":{"name":"a","environments":[]}}`)
		var link struct {
			ShareURL string `json:"share_url"`
		}
		r := e.do("POST", "/api/v2/sessions/"+id+"/share", keyAlice, nil, "X-Forwarded-Proto", tc.proto)
		if err := json.Unmarshal(r.body, &link); err != nil || r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.name, r.status, r.body)
		}
		base := tc.want(srv.URL)
		if !strings.HasPrefix(link.ShareURL, base+"/api/v2/shared/"+id+".") {
			t.Errorf("%s: share_url %q, want under %s/api/v2/shared/", tc.name, link.ShareURL, base)
		}
		path := strings.TrimPrefix(link.ShareURL, base)
		var v struct{ ID string }
		e.expect(e.do("GET", path, "", nil), http.StatusOK).json(&v)
		if v.ID != id {
			t.Errorf("%s: the link opens %q", tc.name, v.ID)
		}
		srv.Close()
	}
}
