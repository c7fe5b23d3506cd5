package client_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// userDataZip is a (tiny) archive of a user-data directory.
func userDataZip(extra ...string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range append([]string{"Local State", "Default/Cookies"}, extra...) {
		w, _ := zw.Create(name)
		w.Write([]byte("contents of " + name))
	}
	zw.Close()
	return buf.Bytes()
}

// TestBrowserProfiles: every browser profile method of the SDK against a
// real server, and sessions whose web environment names a profile, by id
// or as the default: the environment is given the profile, whose archive
// is the one uploaded.
func TestBrowserProfiles(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	var seen []string // per run of a session's web environment: the archive it got, or "none"
	web := func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
		if p.Session != "" {
			got := "none"
			if p.Profile != nil {
				a, err := p.Profile.Archive(context.Background())
				if err != nil {
					return nil, nil, err
				}
				got = string(a)
			}
			mu.Lock()
			seen = append(seen, got)
			mu.Unlock()
		}
		return &loop.Toolset{}, nil, nil
	}
	model := openaitest.NewServer(openaitest.Reply{Text: "one"}, openaitest.Reply{Text: "two"}, openaitest.Reply{Text: "three"})
	defer model.Close()
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "m"}, &session.Options{SessionEnvironments: map[string]session.EnvironmentFunc{"web": web}})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())
	srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{"sk-a", "sk-b"}}))
	defer srv.Close()
	ctx := t.Context()
	a := client.New(srv.URL, "sk-a", nil)
	b := client.New(srv.URL, "sk-b", nil)

	archive := userDataZip()
	desc := "signed in"
	p, err := a.UploadBrowserProfile(ctx, archive, &client.BrowserProfileCreate{Name: "shop", BrowserVersion: "140", Description: &desc, Labels: map[string]string{"env": "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "shop" || p.BrowserName != "chromium" || p.FileSizeBytes == nil || *p.FileSizeBytes != int64(len(archive)) || p.Labels["env"] != "prod" || p.S3Path != nil {
		t.Errorf("uploaded %+v", p)
	}
	if _, err := a.UploadBrowserProfile(ctx, userDataZip("../escape"), &client.BrowserProfileCreate{Name: "bad", BrowserVersion: "1"}); !errors.Is(err, client.ErrInvalid) ||
		!strings.Contains(err.Error(), "leaving the profile") {
		t.Errorf("a hostile archive: %v, want ErrInvalid saying why", err)
	}
	if l, err := a.ListBrowserProfiles(ctx, 5, 0); err != nil || l.Total != 1 || len(l.Profiles) != 1 || l.Profiles[0].ID != p.ID || l.Limit != 5 {
		t.Errorf("ListBrowserProfiles = %+v, %v", l, err)
	}
	if _, err := b.GetBrowserProfile(ctx, p.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("another key's GetBrowserProfile: %v", err)
	}
	if _, err := b.SetDefaultBrowserProfile(ctx, p.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("another key's SetDefaultBrowserProfile: %v", err)
	}
	if _, err := a.DefaultBrowserProfile(ctx, ""); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("no default yet: %v", err)
	}

	run := func(c *client.Client, env client.Environment) (*client.Result, error) {
		return c.RunSession(ctx, &client.SessionRequest{
			Agent:    client.AgentRef{Inline: &client.Agent{Name: "x", Environments: []client.Environment{env}}},
			Messages: client.Text("go"),
		})
	}
	// Without a default, use_default_browser_profile runs a fresh profile.
	if res, err := run(a, client.WebWithProfile("")); err != nil || res.Answer != "one" {
		t.Fatalf("%+v %v", res, err)
	}
	if d, err := a.SetDefaultBrowserProfile(ctx, p.ID); err != nil || !d.IsDefault {
		t.Fatalf("SetDefaultBrowserProfile = %+v, %v", d, err)
	}
	if d, err := a.DefaultBrowserProfile(ctx, "chromium"); err != nil || d.ID != p.ID {
		t.Errorf("DefaultBrowserProfile = %+v, %v", d, err)
	}
	if res, err := run(a, client.WebWithProfile("")); err != nil || res.Answer != "two" {
		t.Fatalf("%+v %v", res, err)
	}
	if res, err := run(a, client.WebWithProfile(p.ID)); err != nil || res.Answer != "three" {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := run(b, client.WebWithProfile(p.ID)); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("another key's profile in a session: %v", err)
	}
	mu.Lock()
	if want := []string{"none", string(archive), string(archive)}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("the environments got %q, want %q", seen, want)
	}
	mu.Unlock()
	if got, err := a.GetBrowserProfile(ctx, p.ID); err != nil || got.UsageCount != 2 || got.LastUsedAt == nil {
		t.Errorf("after two sessions: %+v, %v", got, err)
	}
	if d, err := a.UnsetDefaultBrowserProfile(ctx, p.ID); err != nil || d.IsDefault {
		t.Errorf("UnsetDefaultBrowserProfile = %+v, %v", d, err)
	}
	if err := b.DeleteBrowserProfile(ctx, p.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("another key's DeleteBrowserProfile: %v", err)
	}
	// A field of the wrong type is refused, naming it.
	var bad client.Environment
	if err := json.Unmarshal([]byte(`{"kind":"web","browser_profile_id":5}`), &bad); err != nil {
		t.Fatal(err)
	}
	if _, err := run(a, bad); !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), "browser_profile_id") {
		t.Errorf("a profile id of the wrong type: %v", err)
	}
	// A session created with the profile, whose browser has not run when
	// the profile is deleted, fails to set it up, saying why.
	waiting, err := a.StartSession(ctx, &client.SessionRequest{
		Agent: client.AgentRef{Inline: &client.Agent{Name: "x", Environments: []client.Environment{client.WebWithProfile(p.ID)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteBrowserProfile(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := waiting.SendMessage(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	if res, err := waiting.WaitForCompletion(ctx); err != nil || res.Status != client.Status("failed") || !strings.Contains(res.Error, "deleted since the session was created") {
		t.Errorf("a session whose profile was deleted: %+v %v", res, err)
	}
	if _, err := a.GetBrowserProfile(ctx, p.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
}
