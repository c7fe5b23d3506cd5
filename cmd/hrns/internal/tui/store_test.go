package tui

import (
	"bufio"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
)

func TestStoreSaveGetLast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "hrns", "chats.db")
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("store file mode: %v, %v", fi.Mode(), err)
	}
	if _, err := st.Last("/w"); !errors.Is(err, ErrNoConversation) {
		t.Errorf("Last of an empty store: %v", err)
	}
	a := st.New("/w", "m")
	a.Messages = []llm.Message{llm.UserMessage("first question\nmore"), llm.AssistantMessage("answer")}
	a.Usage["m"] = llm.Usage{InputTokens: 10}
	if err := st.Save(a); err != nil {
		t.Fatal(err)
	}
	b := st.New("/other", "m")
	b.Messages = []llm.Message{llm.UserMessage("elsewhere")}
	if err := st.Save(b); err != nil {
		t.Fatal(err)
	}
	empty := st.New("/w", "m")
	if err := st.Save(empty); err != nil {
		t.Fatal(err)
	}
	got, err := st.Last("/w")
	if err != nil || got.ID != a.ID || got.Title != "first question" || len(got.Messages) != 2 || got.Usage["m"].InputTokens != 10 {
		t.Fatalf("Last = %+v, %v", got, err)
	}
	if got, err := st.Get(a.ID[:len(a.ID)-2]); err != nil || got.ID != a.ID {
		t.Errorf("Get by prefix = %v, %v", got, err)
	}
	if _, err := st.Get("nope"); !errors.Is(err, ErrNoConversation) {
		t.Errorf("Get of an unknown ID: %v", err)
	}
	list, err := st.List("/w", 10)
	if err != nil || len(list) != 1 {
		t.Errorf("List = %v, %v", list, err)
	}
}

func TestResumeInChat(t *testing.T) {
	st, err := OpenStore(filepath.Join(t.TempDir(), "chats.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := newHarness(t, llmtest.Text("Paris."), llmtest.Text("About 2 million."))
	h.c.cfg.Store = st
	h.c.reset()
	h.typeText("capital of France?")
	h.settle()
	id := h.c.conv.ID

	// A new chat resumes it: the model gets the earlier turns after
	// today's system prompt.
	h2 := newHarness(t)
	h2.model.Push(llmtest.Text("About 2 million."))
	h2.c.cfg.Store = st
	h2.typeText("/resume " + id[:12])
	h2.typeText("how many people live there?")
	h2.settle()
	req := h2.model.Requests()[0]
	if len(req.Messages) != 4 || req.Messages[0].Role != llm.RoleSystem || req.Messages[1].Text() != "capital of France?" || req.Messages[2].Text() != "Paris." {
		t.Errorf("the resumed request: %+v", req.Messages)
	}
	if s := h2.screen(); !strings.Contains(s, "Resumed conversation "+id) || !strings.Contains(s, "Paris.") {
		t.Errorf("the resumed conversation is not shown:\n%s", s)
	}
}

// TestStoreMigratesOldSchema: a store written before conversations kept
// their endpoint opens, keeps its conversations, and saves endpoints.
func TestStoreMigratesOldSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chats.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	old := `CREATE TABLE conversations (id TEXT PRIMARY KEY, workdir TEXT NOT NULL, title TEXT NOT NULL, model TEXT NOT NULL,
		created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, messages TEXT NOT NULL, usage TEXT NOT NULL);
		INSERT INTO conversations VALUES ('20260101-aaaa', '/w', 'old one', 'gpt-4.1', 1, 1, '[]', '{}');`
	if _, err := db.Exec(old); err != nil {
		t.Fatal(err)
	}
	db.Close()
	want := ""
	for range 2 { // and again, migrated already
		st, err := OpenStore(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Get("20260101-aaaa")
		if err != nil || c.Title != "old one" || c.Endpoint != want {
			t.Fatalf("the old conversation: %+v, %v", c, err)
		}
		c.Messages = []llm.Message{llm.UserMessage("hi")}
		c.Endpoint = "openai http://x/v1"
		if err := st.Save(c); err != nil {
			t.Fatal(err)
		}
		if c, err := st.Get("20260101-aaaa"); err != nil || c.Endpoint != "openai http://x/v1" {
			t.Fatalf("after saving: %+v, %v", c, err)
		}
		st.Close()
		want = "openai http://x/v1"
	}
}

// TestStoreOpensCurrentSchemaWithOneRead: opening a store whose schema
// is current runs one statement, the read of its version: no schema, no
// migration check. A new store is created in WAL mode, and a store
// migrated by an older hrns (no version) is brought to the current one
// once.
func TestStoreOpensCurrentSchemaWithOneRead(t *testing.T) {
	var stmts []string
	openHook = func(s string) { stmts = append(stmts, strings.Join(strings.Fields(s), " ")) }
	t.Cleanup(func() { openHook = nil })
	open := func(path string) *Store {
		t.Helper()
		stmts = nil
		st, err := OpenStore(path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	path := filepath.Join(t.TempDir(), "chats.db")
	st := open(path)
	if len(stmts) < 3 {
		t.Errorf("a new store ran %d statements: %q", len(stmts), stmts)
	}
	var mode string
	if err := st.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal mode %q, %v", mode, err)
	}
	c := st.New("/w", "m")
	c.Messages = []llm.Message{llm.UserMessage("hi")}
	c.Endpoint = "openai http://x/v1"
	if err := st.Save(c); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for range 2 {
		st = open(path)
		if len(stmts) != 1 || stmts[0] != "PRAGMA user_version" {
			t.Errorf("a current store ran %q", stmts)
		}
		if got, err := st.Get(c.ID); err != nil || got.Endpoint != c.Endpoint || len(got.Messages) != 1 {
			t.Errorf("reopened: %+v, %v", got, err)
		}
		st.Close()
	}

	// A store an older hrns made and migrated: no version, every column.
	old := filepath.Join(t.TempDir(), "chats.db")
	db, err := sql.Open("sqlite", "file:"+old+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(schema + migrations[0].stmt); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st = open(old)
	if len(stmts) < 2 {
		t.Errorf("an unversioned store ran %q", stmts)
	}
	st.Close()
	st = open(old)
	st.Close()
	if len(stmts) != 1 {
		t.Errorf("the same store, now versioned, ran %q", stmts)
	}
}

// TestStoreSaveSurvivesKill: a conversation whose Save has returned is in
// the store after the process that saved it is killed with SIGKILL before
// closing it, both on a new store and on one opened with the current
// schema (the one read of its version, no journal-mode pragma).
func TestStoreSaveSurvivesKill(t *testing.T) {
	if path := os.Getenv("HRNS_TEST_SAVE_AND_HANG"); path != "" {
		st, err := OpenStore(path)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		c := st.New("/w", "m")
		c.Messages = []llm.Message{llm.UserMessage("keep me"), llm.AssistantMessage("kept")}
		if err := st.Save(c); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(c.ID)
		time.Sleep(time.Minute) // killed before this ends; never closed
		os.Exit(1)
	}
	path := filepath.Join(t.TempDir(), "chats.db")
	for _, when := range []string{"new store", "current store"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStoreSaveSurvivesKill$", "-test.count=1")
		cmd.Env = append(os.Environ(), "HRNS_TEST_SAVE_AND_HANG="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		cmd.Process.Kill() // SIGKILL
		cmd.Wait()
		id := strings.TrimSpace(line)
		if err != nil || id == "" || strings.HasPrefix(id, "error") {
			t.Fatalf("%s: the saving process said %q, %v", when, line, err)
		}
		st, err := OpenStore(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Get(id)
		st.Close()
		if err != nil || len(c.Messages) != 2 || c.Messages[1].Text() != "kept" {
			t.Fatalf("%s: after kill -9, %s: %+v, %v", when, id, c, err)
		}
	}
}

// TestStoreFirstOpensAtOnce: processes opening a new store at the same
// time (here connections of one process) wait for each other to make its
// schema: each opens it and saves.
func TestStoreFirstOpensAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chats.db")
	const n = 6
	errs := make(chan error, n)
	for range n {
		go func() {
			st, err := OpenStore(path)
			if err != nil {
				errs <- err
				return
			}
			defer st.Close()
			c := st.New("/w", "m")
			c.Messages = []llm.Message{llm.UserMessage("hi")}
			errs <- st.Save(c)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if list, err := st.List("/w", 10); err != nil || len(list) != n {
		t.Errorf("%d conversations saved, %v", len(list), err)
	}
}

// TestSchemaVersionCoversSchema: a store at schemaVersion is opened
// without its schema or migrations being run, so a change to either
// must raise schemaVersion (and then this test's record of them), or
// stores made before it would never get it.
func TestSchemaVersionCoversSchema(t *testing.T) {
	h := sha256.New()
	h.Write([]byte(schema))
	for _, m := range migrations {
		h.Write([]byte(m.column + "\x00" + m.stmt + "\x00"))
	}
	got := fmt.Sprintf("%d %x", schemaVersion, h.Sum(nil)[:8])
	if want := "1 61d80a9d04e0758f"; got != want {
		t.Errorf("schema and migrations %q, recorded %q: a changed schema or a new migration needs schemaVersion raised, then this record", got, want)
	}
}
