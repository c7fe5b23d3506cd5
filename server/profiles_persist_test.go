package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestProfilePersistConcurrent: two sessions with persist_browser_profile
// on the same profile write their browsers back at once (their web
// environments' close funcs, released together): the profile is then one
// of the two whole, its checksum and size those of the archive stored,
// never a mix. A session whose profile was deleted while it ran writes
// nothing back and does not recreate it. Without a profile named,
// persist_browser_profile is 422.
func TestProfilePersistConcurrent(t *testing.T) {
	var (
		mu       sync.Mutex
		archives = map[string][]byte{} // session: what its browser packs
		errs     = map[string]error{}
		wrote    sync.WaitGroup
	)
	release := make(chan struct{})
	web := func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
		if p.Session == "" || p.Profile == nil || p.Profile.Persist == nil {
			return &loop.Toolset{}, nil, nil
		}
		return &loop.Toolset{}, func(bool) {
			defer wrote.Done()
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
			mu.Lock()
			a := archives[p.Session]
			mu.Unlock()
			err := p.Profile.Persist(context.Background(), a)
			mu.Lock()
			errs[p.Session] = err
			mu.Unlock()
		}, nil
	}
	model := openaitest.NewServer(openaitest.Reply{Text: "ok"}, openaitest.Reply{Text: "ok"}, openaitest.Reply{Text: "ok"})
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{SessionEnvironments: map[string]session.EnvironmentFunc{"web": web}})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}})))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	e := &env{t: t, model: model, url: srv.URL, st: st}
	p := e.uploadProfile(keyAlice, "shared", profileZip(t, archEntry{name: "Local State", body: "{}"}))

	e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","persist_browser_profile":true}]},"messages":"hi"}`), http.StatusUnprocessableEntity)

	persist := fmt.Sprintf(`{"agent":{"name":"a","environments":[{"kind":"web","browser_profile_id":%q,"persist_browser_profile":true}]},"messages":"hi"}`, p.ID)
	wrote.Add(2)
	var ids []string
	for i := range 2 {
		// Each session's archive is known before its run can end.
		id := e.create(keyAlice, persist)
		mu.Lock()
		archives[id] = profileZip(t, archEntry{name: "Local State", body: "{}"}, archEntry{name: "Default/Cookies", body: fmt.Sprintf("jar of session %d", i)})
		mu.Unlock()
		ids = append(ids, id)
	}
	for _, id := range ids {
		e.follow(keyAlice, id).status(session.StatusCompleted)
	}
	close(release)
	wrote.Wait()
	var got profileView
	e.expect(e.do("GET", "/api/v2/browser-profiles/"+p.ID, keyAlice, nil), http.StatusOK).json(&got)
	sess, err := st.GetSession(t.Context(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.ProfileArchive(t.Context(), sess.Owner, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(stored)
	mu.Lock()
	one := string(stored) == string(archives[ids[0]]) || string(stored) == string(archives[ids[1]])
	for _, id := range ids {
		if errs[id] != nil {
			t.Errorf("session %s: Persist: %v", id, errs[id])
		}
	}
	mu.Unlock()
	if !one || got.Checksum == nil || *got.Checksum != hex.EncodeToString(sum[:]) || got.FileSizeBytes == nil || *got.FileSizeBytes != int64(len(stored)) {
		t.Errorf("after two concurrent write-backs: one of them whole %v; profile %+v", one, got)
	}

	// Deleted while a session runs: nothing is written, nothing recreated.
	release = make(chan struct{})
	wrote.Add(1)
	id := e.create(keyAlice, persist)
	mu.Lock()
	archives[id] = profileZip(t, archEntry{name: "Local State", body: "{}"})
	mu.Unlock()
	e.follow(keyAlice, id).status(session.StatusCompleted)
	e.expect(e.do("DELETE", "/api/v2/browser-profiles/"+p.ID, keyAlice, nil), http.StatusNoContent)
	close(release)
	wrote.Wait()
	mu.Lock()
	err = errs[id]
	mu.Unlock()
	if !errors.Is(err, session.ErrProfileGone) {
		t.Errorf("writing back into a deleted profile: %v", err)
	}
	e.expect(e.do("GET", "/api/v2/browser-profiles/"+p.ID, keyAlice, nil), http.StatusNotFound)
}
