package session_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// failedCreateStore answers every creation with an error without
// storing anything: a write that did not commit.
type failedCreateStore struct{ store.Store }

func (s *failedCreateStore) CreateSession(ctx context.Context, sess *store.Session, events []store.Event) (*store.Session, bool, error) {
	return nil, false, errors.New("create session: disk I/O error")
}

// TestLostCreationKeepsFiles: a creation whose first message carries a
// file saves the file in the new session's workspace before its commit.
// When that commit answers an error after it committed (its answer lost),
// the session exists and runs, so its workspace and the file stay; they
// were removed before, and the session ran without the file its message
// names. When the commit did not happen, the workspace goes, as before.
func TestLostCreationKeepsFiles(t *testing.T) {
	body := fmt.Sprintf(`{"agent":{"name":"a"},"messages":{"message":"Read notes.txt.","files":[{"source":%q,"name":"notes.txt"}]}}`,
		base64.StdEncoding.EncodeToString([]byte("the notes")))
	files := func(t *testing.T, dir string) []string {
		t.Helper()
		var got []string
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(path)
				got = append(got, filepath.Base(path)+"="+string(b))
			}
			return nil
		})
		return got
	}
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprint("committed=", committed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				lost := &lostInputStore{Store: openStore(t), claimed: map[string][]int{}}
				var st store.Store = lost
				if !committed {
					st = &failedCreateStore{lost}
				}
				model := llmtest.NewModel(llmtest.Text("read"))
				m, log := newLogged(t, st, model, &session.Options{Workspaces: dir})
				start(t, m)
				lost.loseCreate.Store(true)
				var req session.Request
				if err := json.Unmarshal([]byte(body), &req); err != nil {
					t.Fatal(err)
				}
				if _, _, err := m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req, Raw: json.RawMessage(body)}); err == nil {
					t.Fatal("the creation answered no error")
				}
				if !committed {
					if got := files(t, dir); len(got) != 0 {
						t.Errorf("a creation that did not commit left %v in the workspaces", got)
					}
					return
				}
				f := &follower{t: t, m: m, id: lost.createdID.Load().(string)}
				c := f.until(func(c *session.Changes) bool { return c.Status.Terminal() })
				if c.Status != session.StatusCompleted {
					t.Fatalf("ended %s, want completed; log:\n%s", c.Status, log)
				}
				if got := files(t, dir); len(got) != 1 || got[0] != "notes.txt=the notes" {
					t.Errorf("the workspace of the session whose creation's answer was lost holds %v, want its file notes.txt", got)
				}
				if reqs := model.Requests(); len(reqs) != 1 || !mentions(reqs[0].Messages, "files/notes.txt") {
					t.Errorf("the model was not told of the file: %d requests", len(reqs))
				}
			})
		})
	}
}

// mentions reports whether the text of msgs holds s.
func mentions(msgs []llm.Message, s string) bool {
	b, _ := json.Marshal(msgs)
	return strings.Contains(string(b), s)
}
