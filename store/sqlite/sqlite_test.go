package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
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
	path := storeAtVersion(t, 1,
		`INSERT INTO sessions (id, owner, status, runnable, version, created_at, updated_at) VALUES ('s', 'o', 'running', 1, 3, 1, 1)`)
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

// TestRecoverClaimUsesIndex: RecoverClaim finds a claim's sessions on
// their index, not by scanning every session ever stored.
func TestRecoverClaimUsesIndex(t *testing.T) {
	db := freshSchema(t)
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+sqlite.RecoverClaimSQL, 1, "token", "owner")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if joined := strings.Join(plan, "; "); !strings.Contains(joined, "USING INDEX sessions_by_claim_token") {
		t.Errorf("RecoverClaim's plan: %s; want a search of sessions_by_claim_token", joined)
	}
}

// TestClaimedAgainUsesIndex: a claim of deliveries or schedule runs
// made again with its token finds what the first call took on an index,
// not by scanning every delivery or run stored.
func TestClaimedAgainUsesIndex(t *testing.T) {
	db := freshSchema(t)
	for _, tt := range []struct{ sql, index string }{
		{sqlite.DeliveriesClaimedSQL, "webhook_deliveries_by_claim_token"},
		{sqlite.RunsClaimedSQL, "schedule_runs_by_claim_token"},
	} {
		rows, err := db.Query(`EXPLAIN QUERY PLAN `+tt.sql, "token", "owner")
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
		if joined := strings.Join(plan, "; "); !strings.Contains(joined, "USING INDEX "+tt.index) {
			t.Errorf("plan: %s; want a search of %s", joined, tt.index)
		}
	}
}

// TestListFiltersUseIndexes checks that each filter of ListSessions is
// served by an index within the owner's sessions: no query plan scans the
// table.
func TestListFiltersUseIndexes(t *testing.T) {
	db := freshSchema(t)
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

// TestMigrateRowidLogs upgrades a store of migration 9, whose events and
// messages were WITHOUT ROWID tables, and checks that every row is kept,
// that the logs go on from where they were, and that an index still
// refuses a second row at one index.
func TestMigrateRowidLogs(t *testing.T) {
	long := strings.Repeat("x", 3000) // longer than a WITHOUT ROWID row keeps on its page
	path := storeAtVersion(t, 9,
		`INSERT INTO sessions (id, owner, status, version, event_count, created_at, updated_at) VALUES ('s', 'o', 'running', 3, 3, 1, 1)`,
		`INSERT INTO events VALUES ('s', 0, 'A', X'7B7D', 1), ('s', 1, 'B', CAST('"`+long+`"' AS BLOB), 2), ('s', 2, 'C', CAST('null' AS BLOB), 3)`,
		`INSERT INTO session_messages VALUES ('s', 0, CAST('{"role":"system"}' AS BLOB)), ('s', 1, CAST('"`+long+`"' AS BLOB))`)

	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	events, err := st.Events(ctx, "s", 0, 0)
	if err != nil || len(events) != 3 || events[1].Type != "B" || string(events[1].Data) != `"`+long+`"` || events[2].Time != time.Unix(0, 3).UTC() {
		t.Fatalf("events after the upgrade = %d, %v", len(events), err)
	}
	msgs, err := st.Messages(ctx, "s", 0, 0)
	if err != nil || len(msgs) != 2 || string(msgs[1]) != `"`+long+`"` {
		t.Fatalf("messages after the upgrade = %d, %v", len(msgs), err)
	}
	s, err := st.GetSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	tr := &store.Transcript{From: 2, Messages: []json.RawMessage{json.RawMessage(`"more"`)}}
	if err := st.UpdateSession(ctx, s, []store.Event{{Type: "D", Data: json.RawMessage(`{}`)}}, &store.UpdateOptions{Transcript: tr}); err != nil {
		t.Fatal(err)
	}
	if events, _ := st.Events(ctx, "s", 3, 0); len(events) != 1 || events[0].Index != 3 || events[0].Type != "D" {
		t.Errorf("the event appended after the upgrade: %+v", events)
	}
	if msgs, _ := st.Messages(ctx, "s", 2, 0); len(msgs) != 1 || string(msgs[0]) != `"more"` {
		t.Errorf("the message appended after the upgrade: %s", msgs)
	}
	st.Close()

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`INSERT INTO events VALUES ('s', 1, 'X', X'7B7D', 1)`, `INSERT INTO session_messages VALUES ('s', 1, X'7B7D')`} {
		if _, err := db.Exec(q); err == nil {
			t.Errorf("%s: a second row at one index was accepted", q)
		}
	}
}

// TestStepTablesKeepRowsInTheTable: the tables a step's commit writes
// keep their rows in a rowid table. A WITHOUT ROWID table keeps at most
// about a kilobyte of a row on its page, the rest in overflow pages, and
// orders whole rows by their key; for events, messages and sessions that
// meant several pages written per commit.
func TestStepTablesKeepRowsInTheTable(t *testing.T) {
	db := freshSchema(t)
	for _, table := range []string{"sessions", "events", "session_messages", "webhook_deliveries"} {
		var ddl string
		if err := db.QueryRow(`SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&ddl); err != nil {
			t.Fatalf("table %s: %v", table, err)
		}
		if strings.Contains(strings.ToUpper(ddl), "WITHOUT ROWID") {
			t.Errorf("table %s is WITHOUT ROWID:\n%s", table, ddl)
		}
	}
}

// freshSchema creates a store in a new file, closes it, and opens the file
// as a plain database, to look at the schema the migrations made.
func freshSchema(t *testing.T) *sql.DB {
	t.Helper()
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
	t.Cleanup(func() { db.Close() })
	return db
}

// storeAtVersion writes a database file with the schema of migrations 1 to
// version, user_version set to it, and the rows stmts insert, as a store of
// that version left it, and returns its path.
func storeAtVersion(t *testing.T, version int, stmts ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hrns.db")
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 1; i <= version; i++ {
		files, _ := filepath.Glob(fmt.Sprintf("migrations/%03d_*.sql", i))
		if len(files) != 1 {
			t.Fatalf("migration %d: %v", i, files)
		}
		body, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(body)); err != nil {
			t.Fatalf("%s: %v", files[0], err)
		}
	}
	for _, q := range append([]string{fmt.Sprintf("PRAGMA user_version = %d", version)}, stmts...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return path
}

// TestClaimUsesIndexes: with 100,000 runnable sessions of one key and
// one of another, each statement of Claim searches its partial index
// (by owner, in its order) instead of scanning the backlog, and the
// claim of two takes the second key's session.
func TestClaimUsesIndexes(t *testing.T) {
	db := freshSchema(t)
	if _, err := db.Exec(`WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < 100000)
		INSERT INTO sessions (id, owner, status, runnable, version, created_at, updated_at)
		SELECT 'a-' || i, 'key-a', 'pending', 1, 1, i, i FROM g`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO sessions (id, owner, status, runnable, version, created_at, updated_at) VALUES ('b-1', 'key-b', 'pending', 1, 1, 200000, 200000)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sql string
		args      []any
		want      []string
	}{
		{"owners", sqlite.ClaimOwnersSQL, nil, []string{"SEARCH s USING COVERING INDEX sessions_runnable_by_owner (owner>?)"}},
		{"busy", sqlite.ClaimBusySQL, []any{"key-a", 1}, []string{"sessions_leased_by_owner (owner=? AND lease_until>?)"}},
		{"own", sqlite.ClaimOwnSQL, []any{"key-a", 1, 4, 2}, []string{"SEARCH sessions USING INDEX sessions_runnable_by_owner (owner=?)"}},
		{"wake", sqlite.ClaimWakeSQL, []any{1, 4, 2}, []string{"sessions_wake"}},
	} {
		rows, err := db.Query(`EXPLAIN QUERY PLAN `+c.sql, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
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
		for _, w := range c.want {
			if !strings.Contains(joined, w) {
				t.Errorf("%s: plan %s; want %s", c.name, joined, w)
			}
		}
		if strings.Contains(joined, "TEMP B-TREE") && c.name != "wake" {
			t.Errorf("%s: plan %s sorts; want the index's order", c.name, joined)
		}
	}
	var seq int
	var name, path string
	if err := db.QueryRow(`PRAGMA database_list`).Scan(&seq, &name, &path); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.Claim(t.Context(), &store.ClaimParams{Owner: "w", Now: time.Now(), TTL: time.Minute, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "a-1" || got[1].ID != "b-1" {
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
		}
		t.Errorf("claim of 2: %v; want [a-1 b-1]", ids)
	}
}

// TestCommitsInsertRowsInChunks commits events and transcript messages
// by several rows an INSERT, at most a fixed number (see insertRows):
// each count around those bounds must store every row, in order, with
// its index and data.
func TestCommitsInsertRowsInChunks(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	now := time.Now().UTC()
	s, _, err := st.CreateSession(ctx, &store.Session{ID: "s1", Owner: "o", Status: "running", State: []byte(`{}`), CreatedAt: now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wantEvents []string
	var wantMessages []string
	for _, n := range []int{1, 2, 7, 8, 9, 16, 17, 25, 0, 3} {
		var events []store.Event
		var messages []json.RawMessage
		for i := range n {
			e := fmt.Sprintf(`{"n":%d,"i":%d}`, n, i)
			events = append(events, store.Event{Type: fmt.Sprintf("T%d", i), Data: json.RawMessage(e)})
			wantEvents = append(wantEvents, fmt.Sprintf("T%d %s", i, e))
			m := fmt.Sprintf(`{"m":%d,"i":%d}`, n, i)
			messages = append(messages, json.RawMessage(m))
			wantMessages = append(wantMessages, m)
		}
		if n == 3 {
			messages[1] = nil // stored as null
			wantMessages[len(wantMessages)-2] = "null"
		}
		err := st.UpdateSession(ctx, s, events, &store.UpdateOptions{Transcript: &store.Transcript{From: int64(len(wantMessages) - n), Messages: messages}})
		if err != nil {
			t.Fatalf("%d rows: %v", n, err)
		}
		for i, e := range events {
			if want := int64(len(wantEvents) - n + i); e.Index != want {
				t.Fatalf("%d rows: event %d has index %d, want %d", n, i, e.Index, want)
			}
		}
	}
	events, err := st.Events(ctx, "s1", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(wantEvents) {
		t.Fatalf("%d events stored, want %d", len(events), len(wantEvents))
	}
	for i, e := range events {
		if got := fmt.Sprintf("%s %s", e.Type, e.Data); e.Index != int64(i) || got != wantEvents[i] {
			t.Errorf("event %d: index %d, %s; want %s", i, e.Index, got, wantEvents[i])
		}
	}
	messages, err := st.Messages(ctx, "s1", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(messages) != len(wantMessages) {
		t.Fatalf("%d messages stored, want %d", len(messages), len(wantMessages))
	}
	for i, m := range messages {
		if string(m) != wantMessages[i] {
			t.Errorf("message %d: %s, want %s", i, m, wantMessages[i])
		}
	}
}

// TestWebhookAfterStatusChanges: a status change of a session whose owner
// has no webhook remembers that (so that the next ones do not look
// again), and a webhook created, or enabled again, afterwards must still
// get the next change's deliveries; one of another owner must not make
// the first owner's changes deliver.
func TestWebhookAfterStatusChanges(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	now := time.Now().UTC()
	s, _, err := st.CreateSession(ctx, &store.Session{ID: "s1", Owner: "o", Status: "running", State: []byte(`{}`), CreatedAt: now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	status := func(to string) {
		t.Helper()
		s.Status = to
		if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	deliveries := func(owner, hook string) int {
		t.Helper()
		_, n, err := st.ListDeliveries(ctx, &store.DeliveryListParams{Owner: owner, WebhookID: hook})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	status("awaiting_tool_results") // no webhook: remembered
	status("running")
	if _, err := st.CreateWebhook(ctx, &store.Webhook{ID: "other", Owner: "p", URL: "http://127.0.0.1:1/", Events: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	status("awaiting_tool_results")
	if n := deliveries("p", "other"); n != 0 {
		t.Fatalf("another owner's webhook got %d deliveries", n)
	}
	w, err := st.CreateWebhook(ctx, &store.Webhook{ID: "w1", Owner: "o", URL: "http://127.0.0.1:1/", Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	status("running")
	if n := deliveries("o", "w1"); n != 1 {
		t.Fatalf("a webhook created after status changes without one got %d deliveries of the next change, want 1", n)
	}
	w.Disabled = true
	if w, err = st.UpdateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	status("awaiting_tool_results") // disabled: none
	status("running")
	w.Disabled = false
	if _, err = st.UpdateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	status("awaiting_tool_results")
	if n := deliveries("o", "w1"); n != 2 {
		t.Fatalf("a webhook enabled again got %d deliveries in all, want 2", n)
	}
	if err := st.DeleteWebhook(ctx, "o", "w1"); err != nil {
		t.Fatal(err)
	}
	status("running")
}
