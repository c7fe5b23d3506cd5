package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
	"github.com/hrns-dev/hrns/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	})
}

func TestOneProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hrns.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(path, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Open = %v, want an in-use error", err)
	}
	st.Close()
	st2, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	st2.Close()
}

func TestReopenVoidsLeases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hrns.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, _, err := st.CreateSession(ctx, &store.Session{ID: "s", Owner: "o", Status: "running", Runnable: true}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := st.Claim(ctx, &store.ClaimParams{Owner: "dead", Now: time.Now(), TTL: time.Hour})
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	st.Close()
	st, err = sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err = st.Claim(ctx, &store.ClaimParams{Owner: "new", Now: time.Now(), TTL: time.Hour})
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim after reopen = %v, %v; want the session a dead process held", got, err)
	}
	// The dead process's attempt counts.
	if got[0].Attempts != 2 {
		t.Errorf("Claim after reopen: Attempts %d, want 2", got[0].Attempts)
	}
}

// TestMigrateAttempts opens a file of the first schema, with a session in
// it: the upgrade gives the session an attempt count of 0, which claims
// then increment.
func TestMigrateAttempts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hrns.db")
	schema, err := os.ReadFile("migrations/001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{string(schema), `PRAGMA user_version = 1`,
		`INSERT INTO sessions (id, owner, status, runnable, version, created_at, updated_at) VALUES ('s', 'o', 'running', 1, 3, 1, 1)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	s, err := st.GetSession(ctx, "s")
	if err != nil || s.Attempts != 0 || s.Version != 3 {
		t.Fatalf("GetSession after the upgrade = %+v, %v; want version 3, 0 attempts", s, err)
	}
	got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w", Now: time.Now(), TTL: time.Hour})
	if err != nil || len(got) != 1 || got[0].Attempts != 1 {
		t.Fatalf("Claim after the upgrade = %v, %v; want the session with 1 attempt", got, err)
	}
}

// TestListFiltersUseIndexes checks that each filter of ListSessions is
// served by an index within the owner's sessions: no query plan scans the
// table.
func TestListFiltersUseIndexes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hrns.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, where := range []string{
		`owner = 'a' AND status IN ('queued')`,
		`owner = 'a' AND agent IN ('x', 'y')`,
		`owner = 'a' AND group_id = 'g'`,
		`owner = 'a' AND parent_id = 'p'`,
		`owner = 'a' AND schedule_id = 's'`,
		`owner = 'a' AND created_at > 5 AND created_at < 9`,
		`owner = 'a' AND finished_at > 5`,
		`owner = 'a' AND (lower(first_message) LIKE '%x%' ESCAPE '\' OR lower(CAST(answer AS TEXT)) LIKE '%x%' ESCAPE '\')`,
	} {
		rows, err := db.Query(`EXPLAIN QUERY PLAN SELECT id FROM sessions WHERE ` + where + ` ORDER BY created_at DESC, id DESC`)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		joined := strings.Join(plan, "; ")
		t.Logf("%s: %s", where, joined)
		if strings.Contains(joined, "SCAN sessions") && !strings.Contains(joined, "USING INDEX") {
			t.Errorf("%s: plan scans the table: %s", where, joined)
		}
	}
}
