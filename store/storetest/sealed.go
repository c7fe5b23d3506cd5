package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/store"
)

// sealedTests are the subtests of [store.Sealed] and of
// [store.UpdateOptions.WriteRequest].
var sealedTests = []struct {
	name string
	fn   func(t *testing.T, st store.Store)
}{
	{"SessionsSealed", testSessionsSealed},
	{"EntriesSealed", testEntriesSealed},
	{"SchedulesSealed", testSchedulesSealed},
	{"WriteRequest", testWriteRequest},
}

// sealedDocs are documents and whether one holds a value of a key other
// than k2: under k1, under k2 only, both, none, the prefix alone (its
// key unknown: a match), bytes that are not UTF-8 around a value of k1,
// and k2's id as a prefix of another key's (k22).
var sealedDocs = []struct {
	doc   string
	match bool
}{
	{`{"v":"hrns-sealed:v1:k1:AAAA"}`, true},
	{`{"v":"hrns-sealed:v1:k2:AAAA","w":"hrns-sealed:v1:k2:BBBB"}`, false},
	{`{"v":"hrns-sealed:v1:k2:AAAA","w":"hrns-sealed:v1:k1:BBBB"}`, true},
	{`{"v":"plain"}`, false},
	{`{"v":"hrns-sealed:v1:"}`, true},
	{"{\"v\":\"\xff\xfe\\\\ hrns-sealed:v1:k1:AAAA\"}", true},
	{`{"v":"hrns-sealed:v1:k22:AAAA"}`, true},
}

func sealedParams(limit int) *store.SealedParams {
	return &store.SealedParams{Prefix: "hrns-sealed:v1:", KeyID: "k2", Limit: limit}
}

func testSessionsSealed(t *testing.T, st store.Store) {
	ctx := t.Context()
	var want []string
	for i, d := range sealedDocs {
		// Once in the request, once in the state.
		for j, where := range []string{"r", "s"} {
			s := newSession(sealedID(i, j), []string{"alice", "bob"}[(i+j)%2])
			if where == "r" {
				s.Request = json.RawMessage(d.doc)
			} else {
				s.State = json.RawMessage(d.doc)
			}
			mustCreate(t, st, s)
			if d.match {
				want = append(want, s.ID)
			}
		}
	}
	slices.Sort(want)
	p := sealedParams(3)
	var got []string
	for range 20 {
		page, err := st.SessionsSealed(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 3 {
			t.Fatalf("a page of %d, limit 3", len(page))
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		p.After = page[len(page)-1]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SessionsSealed (-want +got):\n%s", diff)
	}
}

// sealedID is an id whose order is the same in every collation.
func sealedID(i, j int) string { return string(rune('a'+i)) + string(rune('a'+j)) }

func testEntriesSealed(t *testing.T, st store.Store) {
	ctx := t.Context()
	var want []string
	for i, d := range sealedDocs {
		for j, kind := range []string{store.KindAgent, store.KindEnvironment} {
			e := newEntry(kind, []string{"alice", "bob"}[(i+j)%2], sealedID(i, j))
			e.Spec = json.RawMessage(d.doc)
			e.Files = json.RawMessage(`{"f":"x"}`)
			mustCreateEntry(t, st, e)
			if d.match {
				want = append(want, kind+" "+e.Owner+" "+e.Name)
			}
		}
	}
	slices.Sort(want)
	p := sealedParams(2)
	var got []string
	for range 20 {
		page, err := st.EntriesSealed(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if string(e.Files) != `{"f":"x"}` {
				t.Errorf("EntriesSealed returned %s without its files", e.Name)
			}
			got = append(got, e.Kind+" "+e.Owner+" "+e.Name)
		}
		last := page[len(page)-1]
		p.AfterEntry = &store.Entry{Kind: last.Kind, Owner: last.Owner, Name: last.Name}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EntriesSealed (-want +got):\n%s", diff)
	}
}

func testSchedulesSealed(t *testing.T, st store.Store) {
	ctx := t.Context()
	var want []string
	for i, d := range sealedDocs {
		sc := newSchedule(sealedID(i, 0), []string{"alice", "bob"}[i%2])
		sc.Spec = json.RawMessage(d.doc)
		mustCreateSchedule(t, st, sc)
		if d.match {
			want = append(want, sc.ID)
		}
	}
	p := sealedParams(2)
	var got []string
	for range 20 {
		page, err := st.SchedulesSealed(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, sc := range page {
			got = append(got, sc.ID)
		}
		p.After = page[len(page)-1].ID
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SchedulesSealed (-want +got):\n%s", diff)
	}
}

// testWriteRequest: an update writes the request only with WriteRequest,
// under the version check like the rest.
func testWriteRequest(t *testing.T, st store.Store) {
	ctx := t.Context()
	s := mustCreate(t, st, newSession("s1", "alice"))
	stale := *s
	s.Request = json.RawMessage(`{"changed":1}`)
	if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetSession(ctx, "s1"); string(got.Request) != `{"agent":"support-agent"}` {
		t.Errorf("an update without WriteRequest wrote the request: %s", got.Request)
	}
	stale.Request = json.RawMessage(`{"stale":1}`)
	if err := st.UpdateSession(ctx, &stale, nil, &store.UpdateOptions{WriteRequest: true}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a stale update with WriteRequest: %v", err)
	}
	if err := st.UpdateSession(ctx, s, nil, &store.UpdateOptions{WriteRequest: true}); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Request) != `{"changed":1}` || got.Version != 3 {
		t.Errorf("after WriteRequest: version %d, request %s", got.Version, got.Request)
	}
}
