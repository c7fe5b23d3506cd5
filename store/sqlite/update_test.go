package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestUpdateInOneAsBefore runs the same random commits on two stores, one
// whose UpdateSession tries the update in one statement first (the
// store's own) and one that reads the session first (as before), from the
// same random sessions: stale and current versions, leases held, expired,
// someone else's or none, claims that may or may not take the session
// (attempts, a lease in the way), releases, resets, another agent, another
// owner, callers whose event count, attempts or lease are not as stored, owners with and without webhooks, tokens, transcripts, missing
// sessions. Both must answer the same error, leave the caller's session,
// the stored row, its events, transcript, webhook deliveries and token
// counts the same, and wake the same topics. Both ways of committing must
// have been taken many times.
func TestUpdateInOneAsBefore(t *testing.T) {
	ctx := context.Background()
	type side struct {
		st  *sqlite.Store
		raw *sql.DB
	}
	open := func(slow bool) side {
		path := filepath.Join(t.TempDir(), "hrns.db")
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if slow {
			sqlite.SlowUpdates(st)
		}
		raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		if _, err := st.CreateWebhook(ctx, &store.Webhook{Owner: "hooked", URL: "http://127.0.0.1:1/", Events: []string{"*", store.EventIdle}}); err != nil {
			t.Fatal(err)
		}
		return side{st, raw}
	}
	one, before := open(false), open(true)
	applied := map[bool]int{}
	sqlite.OneHook(one.st, func(ok bool) { applied[ok]++ })

	rng := rand.New(rand.NewPCG(36, 2))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	created := time.Unix(1700000000, 0).UTC()
	for i := range 600 {
		id := fmt.Sprintf("s%d", i)
		owner := pick("o1", "o2", "hooked")
		now := time.Now()
		// The session as stored.
		status := pick("idle", "running", "awaiting_tool_results")
		row := []any{
			status, pick("a", "b"), rng.IntN(2),
			pick("", "", "w1", "w2"), []int64{0, now.Add(-time.Minute).UnixNano(), now.Add(time.Minute).UnixNano(), now.Add(time.Minute).UnixNano()}[rng.IntN(4)],
			rng.IntN(5), rng.IntN(4), rng.IntN(3), pick("", "t0"),
		}
		for _, sd := range []side{one, before} {
			if _, _, err := sd.st.CreateSession(ctx, &store.Session{ID: id, Owner: owner, Agent: "a", Status: "pending", State: json.RawMessage(`{}`), CreatedAt: created}, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := sd.raw.ExecContext(ctx, `UPDATE sessions SET status = ?, agent = ?, runnable = ?, lease_owner = ?, lease_until = ?,
				attempts = ?, version = ?, event_count = ?, claim_token = ? WHERE id = ?`, append(row, id)...); err != nil {
				t.Fatal(err)
			}
		}
		got, err := one.st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		// The caller's change.
		sess := *got
		if rng.IntN(5) == 0 {
			sess.Version += int64(rng.IntN(3)) - 1
		}
		if rng.IntN(10) == 0 {
			sess.ID = "missing"
		}
		if rng.IntN(8) == 0 {
			sess.EventCount += int64(rng.IntN(3)) - 1
		}
		if rng.IntN(6) == 0 {
			sess.Attempts = rng.IntN(5)
		}
		if rng.IntN(8) == 0 {
			sess.LeaseOwner, sess.LeaseUntil = pick("", "w1"), now.Add(time.Minute)
		}
		if rng.IntN(5) == 0 {
			sess.Owner = pick("o1", "hooked", "other")
		}
		if rng.IntN(6) == 0 {
			sess.Agent = pick("a", "b", "c")
		}
		if rng.IntN(2) == 0 {
			sess.Status = pick("idle", "running", "awaiting_tool_results", "completed")
		}
		sess.Runnable = rng.IntN(2) == 0
		if rng.IntN(4) == 0 {
			sess.WakeAt = created.Add(time.Hour)
		}
		sess.State = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
		var o store.UpdateOptions
		if rng.IntN(2) == 0 {
			o.Lease = pick("w1", "w2")
			if held := row[3].(string); held != "" && rng.IntN(4) != 0 {
				o.Lease = held // mostly the lease's holder
			}
		}
		o.Release = rng.IntN(3) == 0
		o.ResetAttempts = rng.IntN(4) == 0
		if rng.IntN(2) == 0 {
			ttl := []time.Duration{time.Minute, -time.Minute}[rng.IntN(2)]
			o.Claim = &store.ClaimParams{Owner: pick("w1", "w3"), Token: fmt.Sprintf("t%d", i), Now: now, TTL: ttl, BelowAttempts: rng.IntN(5)}
			if rng.IntN(4) != 0 {
				o.Lease, o.Release = "", false // mostly a valid claim
			}
		}
		if rng.IntN(3) == 0 {
			o.Tokens = &store.TokenCount{Period: "day", Start: created, N: int64(rng.IntN(3))}
		}
		if rng.IntN(3) == 0 {
			o.Transcript = &store.Transcript{From: int64(rng.IntN(2)), Messages: []json.RawMessage{json.RawMessage(`{"m":1}`)}}
		}
		events := make([]store.Event, rng.IntN(3))
		for k := range events {
			events[k] = store.Event{Type: "e", Data: json.RawMessage(fmt.Sprintf(`{"k":%d}`, k)), Time: created}
		}

		type outcome struct {
			Err                    string
			Sess, Stored           store.Session
			Events                 []store.Event
			Messages               []json.RawMessage
			Deliveries             int64
			Tokens                 string
			Woken, Work, Webhooked bool
		}
		run := func(sd side) outcome {
			var out outcome
			subs := make([]<-chan struct{}, 3)
			for k, topic := range []string{sess.ID, store.WorkTopic, store.WebhookTopic} {
				ch, cancel := sd.st.Subscribe(topic)
				defer cancel()
				subs[k] = ch
			}
			s := sess
			evs := append([]store.Event(nil), events...)
			err := sd.st.UpdateSession(ctx, &s, evs, &o)
			for _, target := range []error{store.ErrNotFound, store.ErrConflict, store.ErrLeaseLost, store.ErrClaimWithLease, store.ErrTranscriptGap} {
				if errors.Is(err, target) {
					out.Err = target.Error()
				}
			}
			if err != nil && out.Err == "" {
				t.Fatalf("case %d: unexpected error %v", i, err)
			}
			s.UpdatedAt = time.Time{}
			out.Sess = s
			stored, err := sd.st.GetSession(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			stored.UpdatedAt = time.Time{}
			out.Stored = *stored
			if out.Events, err = sd.st.Events(ctx, id, 0, -1); err != nil {
				t.Fatal(err)
			}
			if out.Messages, err = sd.st.Messages(ctx, id, 0, -1); err != nil {
				t.Fatal(err)
			}
			if err := sd.raw.QueryRowContext(ctx, `SELECT count(*) FROM webhook_deliveries WHERE session_id = ?`, id).Scan(&out.Deliveries); err != nil {
				t.Fatal(err)
			}
			if err := sd.raw.QueryRowContext(ctx, `SELECT coalesce(group_concat(owner || ':' || tokens, ' '), '') FROM (SELECT owner, tokens FROM token_usage ORDER BY owner)`).Scan(&out.Tokens); err != nil {
				t.Fatal(err)
			}
			woken := func(ch <-chan struct{}) bool {
				select {
				case <-ch:
					return true
				default:
					return false
				}
			}
			out.Woken, out.Work, out.Webhooked = woken(subs[0]), woken(subs[1]), woken(subs[2])
			return out
		}
		a, b := run(one), run(before)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("case %d (stored %v, caller's version %d owner %s agent %s status %s runnable %v, options %+v, claim %+v, %d events):\n in one statement: %+v\n as before:        %+v",
				i, row, sess.Version, sess.Owner, sess.Agent, sess.Status, sess.Runnable, o, o.Claim, len(events), a, b)
		}
	}
	t.Logf("the update in one statement applied %d times, fell back %d times", applied[true], applied[false])
	if applied[true] < 50 || applied[false] < 50 {
		t.Fatalf("the update in one statement applied %d times, fell back %d times: the cases do not cover both", applied[true], applied[false])
	}
}

// TestUpdateInOneStatement checks that the commits of a session woken by
// a caller's message, a worker's steps under its lease and the release
// at its pause, are made by the update in one statement, without reading
// the session first, when the owner has no webhook.
func TestUpdateInOneStatement(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var applied []bool
	sqlite.OneHook(st, func(ok bool) { applied = append(applied, ok) })
	ctx := context.Background()
	s, _, err := st.CreateSession(ctx, &store.Session{ID: "s", Owner: "o", Agent: "a", Status: "running", State: json.RawMessage(`{}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := []store.Event{{Type: "e", Data: json.RawMessage(`{}`)}}
	// CreateSession looked the owner's webhooks up: it has none.
	s.Status = "idle"
	if err := st.UpdateSession(ctx, s, ev, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.Status, s.Runnable = "running", true
		if err := st.UpdateSession(ctx, s, ev, &store.UpdateOptions{Claim: &store.ClaimParams{Owner: "w", Token: "t", Now: time.Now(), TTL: time.Minute}}); err != nil {
			t.Fatal(err)
		}
		if s.LeaseOwner != "w" || s.Attempts != 1 {
			t.Fatalf("lease %q, attempts %d after the input; want w, 1", s.LeaseOwner, s.Attempts)
		}
		if err := st.UpdateSession(ctx, s, ev, &store.UpdateOptions{Lease: "w", ResetAttempts: true}); err != nil {
			t.Fatal(err)
		}
		s.Status, s.Runnable = "idle", false
		if err := st.UpdateSession(ctx, s, ev, &store.UpdateOptions{Lease: "w", Release: true}); err != nil {
			t.Fatal(err)
		}
	}
	want := []bool{true, true, true, true, true, true, true, true, true, true}
	if !reflect.DeepEqual(applied, want) {
		t.Fatalf("the update in one statement applied %v; want %v", applied, want)
	}
	if _, n, err := st.EventCount(ctx, "s"); err != nil || n != 10 {
		t.Fatalf("%d events, %v; want 10", n, err)
	}
}
