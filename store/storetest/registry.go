package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/store"
)

// registryTests are the subtests of [store.Registry].
var registryTests = []struct {
	name string
	fn   func(t *testing.T, st store.Store)
}{
	{"RegistryCRUD", testRegistryCRUD},
	{"RegistryScope", testRegistryScope},
	{"RegistryList", testRegistryList},
	{"RegistryCreateConcurrent", testRegistryCreateConcurrent},
	{"RegistryUpdateConcurrent", testRegistryUpdateConcurrent},
}

func newEntry(kind, owner, name string) *store.Entry {
	return &store.Entry{
		Kind:        kind,
		Owner:       owner,
		Name:        name,
		Description: "Answers order questions",
		Spec:        json.RawMessage(fmt.Sprintf(`{"name":%q,"description":"Answers order questions"}`, name)),
		CreatedAt:   base,
	}
}

func mustCreateEntry(t *testing.T, st store.Store, e *store.Entry) *store.Entry {
	t.Helper()
	got, err := st.CreateEntry(t.Context(), e)
	if err != nil {
		t.Fatalf("CreateEntry(%s %s/%s) = %v", e.Kind, e.Owner, e.Name, err)
	}
	return got
}

func testRegistryCRUD(t *testing.T, st store.Store) {
	ctx := t.Context()
	in := newEntry(store.KindSkill, "alice", "h/order-lookup")
	in.Files = json.RawMessage(`{"scripts/run.sh":"echo hi"}`)
	got := mustCreateEntry(t, st, in)
	want := *in
	want.Version, want.UpdatedAt = 1, base
	if diff := cmp.Diff(&want, got, cmpSession); diff != "" {
		t.Errorf("CreateEntry returned (-want +got):\n%s", diff)
	}
	read, err := st.GetEntry(ctx, store.KindSkill, "alice", "h/order-lookup")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, read, cmpSession); diff != "" {
		t.Errorf("GetEntry (-want +got):\n%s", diff)
	}
	// A second creation of the name writes nothing.
	dup := newEntry(store.KindSkill, "alice", "h/order-lookup")
	dup.Description = "another"
	if _, err := st.CreateEntry(ctx, dup); !errors.Is(err, store.ErrEntryExists) {
		t.Errorf("CreateEntry of an existing name = %v, want ErrEntryExists", err)
	}
	if again, _ := st.GetEntry(ctx, store.KindSkill, "alice", "h/order-lookup"); again == nil || again.Description != in.Description {
		t.Errorf("a refused creation changed the entry: %+v", again)
	}

	// Update at the version read.
	up := *read
	up.Description, up.Type = "Looks orders up", "v2"
	up.Spec = json.RawMessage(`{"name":"h/order-lookup","description":"Looks orders up"}`)
	up.Files = nil
	updated, err := st.UpdateEntry(ctx, &up)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Version != 2 || !updated.CreatedAt.Equal(base) || updated.UpdatedAt.Before(base) || updated.Files != nil {
		t.Errorf("UpdateEntry returned version %d, created %v, updated %v, files %s; want 2, %v, later, none", updated.Version, updated.CreatedAt, updated.UpdatedAt, updated.Files, base)
	}
	read, _ = st.GetEntry(ctx, store.KindSkill, "alice", "h/order-lookup")
	if diff := cmp.Diff(updated, read, cmpSession); diff != "" {
		t.Errorf("GetEntry after UpdateEntry (-returned +read):\n%s", diff)
	}
	// A stale version is a conflict and writes nothing.
	stale := up
	stale.Description = "stale"
	if _, err := st.UpdateEntry(ctx, &stale); !errors.Is(err, store.ErrConflict) {
		t.Errorf("UpdateEntry at a stale version = %v, want ErrConflict", err)
	}
	if again, _ := st.GetEntry(ctx, store.KindSkill, "alice", "h/order-lookup"); again.Description != "Looks orders up" {
		t.Errorf("a stale update changed the entry: %q", again.Description)
	}
	missing := newEntry(store.KindSkill, "alice", "nope")
	missing.Version = 1
	if _, err := st.UpdateEntry(ctx, missing); !errors.Is(err, store.ErrEntryNotFound) {
		t.Errorf("UpdateEntry of a missing entry = %v, want ErrEntryNotFound", err)
	}

	// Delete, then it is gone.
	if err := st.DeleteEntry(ctx, store.KindSkill, "alice", "h/order-lookup"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetEntry(ctx, store.KindSkill, "alice", "h/order-lookup"); !errors.Is(err, store.ErrEntryNotFound) {
		t.Errorf("GetEntry after DeleteEntry = %v, want ErrEntryNotFound", err)
	}
	if err := st.DeleteEntry(ctx, store.KindSkill, "alice", "h/order-lookup"); !errors.Is(err, store.ErrEntryNotFound) {
		t.Errorf("DeleteEntry twice = %v, want ErrEntryNotFound", err)
	}
	// The name can be created again, from version 1.
	if again := mustCreateEntry(t, st, newEntry(store.KindSkill, "alice", "h/order-lookup")); again.Version != 1 {
		t.Errorf("recreated entry has version %d, want 1", again.Version)
	}
	// Entries returned are the caller's.
	read, _ = st.GetEntry(ctx, store.KindSkill, "alice", "h/order-lookup")
	read.Description = "mutated"
	if again, _ := st.GetEntry(ctx, store.KindSkill, "alice", "h/order-lookup"); again.Description == "mutated" {
		t.Error("the store kept the caller's entry")
	}
}

func testRegistryScope(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreateEntry(t, st, newEntry(store.KindAgent, "alice", "support"))
	bobs := newEntry(store.KindAgent, "bob", "support")
	bobs.Description = "Bob's"
	mustCreateEntry(t, st, bobs)
	// The same name of another kind is another entry.
	mustCreateEntry(t, st, newEntry(store.KindSkill, "alice", "support"))

	got, err := st.GetEntry(ctx, store.KindAgent, "bob", "support")
	if err != nil || got.Description != "Bob's" {
		t.Fatalf("GetEntry(bob) = %+v, %v", got, err)
	}
	if _, err := st.GetEntry(ctx, store.KindAgent, "carol", "support"); !errors.Is(err, store.ErrEntryNotFound) {
		t.Errorf("GetEntry of another owner = %v, want ErrEntryNotFound", err)
	}
	other := newEntry(store.KindAgent, "carol", "support")
	other.Version = 1
	if _, err := st.UpdateEntry(ctx, other); !errors.Is(err, store.ErrEntryNotFound) {
		t.Errorf("UpdateEntry by another owner = %v, want ErrEntryNotFound", err)
	}
	if err := st.DeleteEntry(ctx, store.KindAgent, "carol", "support"); !errors.Is(err, store.ErrEntryNotFound) {
		t.Errorf("DeleteEntry by another owner = %v, want ErrEntryNotFound", err)
	}
	if err := st.DeleteEntry(ctx, store.KindAgent, "alice", "support"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetEntry(ctx, store.KindAgent, "bob", "support"); err != nil {
		t.Errorf("deleting alice's agent touched bob's: %v", err)
	}
	if _, err := st.GetEntry(ctx, store.KindSkill, "alice", "support"); err != nil {
		t.Errorf("deleting alice's agent touched her skill: %v", err)
	}
	page, total, err := st.ListEntries(ctx, &store.EntryListParams{Kind: store.KindAgent, Owner: "bob"})
	if err != nil || total != 1 || len(page) != 1 || page[0].Owner != "bob" {
		t.Errorf("ListEntries(bob) = %d of %d, %v; want bob's one", len(page), total, err)
	}
}

func testRegistryList(t *testing.T, st store.Store) {
	ctx := t.Context()
	for i, e := range []struct{ name, typ, desc string }{
		{"alpha", "web", "Reads the NEWS"},
		{"beta", "desktop", "Clicks buttons"},
		{"gamma-news", "web", "Other"},
		{"delta", "web", "ÉCOLE news"},
		{"b-side", "web", "école"},
	} {
		in := newEntry(store.KindEnvironment, "alice", e.name)
		in.Type, in.Description = e.typ, e.desc
		in.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		in.Files = json.RawMessage(`{"a":"b"}`)
		mustCreateEntry(t, st, in)
	}
	mustCreateEntry(t, st, newEntry(store.KindEnvironment, "bob", "news"))
	mustCreateEntry(t, st, newEntry(store.KindAgent, "alice", "news"))

	names := func(page []*store.Entry) []string {
		var out []string
		for _, e := range page {
			out = append(out, e.Name)
			if e.Files != nil {
				t.Errorf("listed entry %s has files", e.Name)
			}
		}
		return out
	}
	for _, tt := range []struct {
		name      string
		p         store.EntryListParams
		want      []string
		wantTotal int
	}{
		{"newest first", store.EntryListParams{}, []string{"b-side", "delta", "gamma-news", "beta", "alpha"}, 5},
		{"oldest first", store.EntryListParams{Sort: store.SortCreatedAsc}, []string{"alpha", "beta", "gamma-news", "delta", "b-side"}, 5},
		{"by name", store.EntryListParams{Sort: store.SortNameAsc}, []string{"alpha", "b-side", "beta", "delta", "gamma-news"}, 5},
		{"by name descending", store.EntryListParams{Sort: store.SortNameDesc}, []string{"gamma-news", "delta", "beta", "b-side", "alpha"}, 5},
		{"page", store.EntryListParams{Sort: store.SortNameAsc, Offset: 1, Limit: 2}, []string{"b-side", "beta"}, 5},
		{"past the end", store.EntryListParams{Offset: 10}, nil, 5},
		{"type", store.EntryListParams{Type: "desktop"}, []string{"beta"}, 1},
		{"name ignoring case", store.EntryListParams{Name: "NEWS"}, []string{"gamma-news"}, 1},
		{"search name or description", store.EntryListParams{Search: "news", Sort: store.SortNameAsc}, []string{"alpha", "delta", "gamma-news"}, 3},
		{"search folds ASCII only", store.EntryListParams{Search: "école"}, []string{"b-side"}, 1},
		{"search with LIKE characters", store.EntryListParams{Search: "%"}, nil, 0},
		{"all filters", store.EntryListParams{Type: "web", Name: "a", Search: "news"}, []string{"delta", "gamma-news", "alpha"}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			p.Kind, p.Owner = store.KindEnvironment, "alice"
			page, total, err := st.ListEntries(ctx, &p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, names(page)); diff != "" || total != tt.wantTotal {
				t.Errorf("ListEntries = %d in all, want %d; names (-want +got):\n%s", total, tt.wantTotal, diff)
			}
		})
	}
	page, _, err := st.ListEntries(ctx, &store.EntryListParams{Kind: store.KindEnvironment, Owner: "alice", Type: "desktop"})
	if err != nil || len(page) != 1 {
		t.Fatalf("ListEntries = %v, %v", page, err)
	}
	if e := page[0]; e.Kind != store.KindEnvironment || e.Owner != "alice" || e.Type != "desktop" || e.Description != "Clicks buttons" ||
		e.Version != 1 || !e.CreatedAt.Equal(base.Add(time.Minute)) || len(e.Spec) == 0 {
		t.Errorf("listed entry = %+v", e)
	}
	if _, _, err := st.ListEntries(ctx, &store.EntryListParams{Kind: store.KindEnvironment, Owner: "alice", Sort: "size"}); err == nil {
		t.Error("ListEntries with an unknown sort succeeded")
	}
}

func testRegistryCreateConcurrent(t *testing.T, st store.Store) {
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		errs    []error
	)
	for i := range n {
		wg.Go(func() {
			e := newEntry(store.KindAgent, "alice", "racer")
			e.Description = fmt.Sprint(i)
			_, err := st.CreateEntry(t.Context(), e)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case !errors.Is(err, store.ErrEntryExists):
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if created != 1 || len(errs) > 0 {
		t.Errorf("%d concurrent creations of one name: %d succeeded, errors %v; want 1 and ErrEntryExists for the others", n, created, errs)
	}
}

func testRegistryUpdateConcurrent(t *testing.T, st store.Store) {
	read := mustCreateEntry(t, st, newEntry(store.KindAgent, "alice", "racer"))
	const n = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		updated  int
		failures []error
	)
	for i := range n {
		wg.Go(func() {
			e := *read
			e.Description = fmt.Sprint(i)
			_, err := st.UpdateEntry(t.Context(), &e)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				updated++
			case !errors.Is(err, store.ErrConflict):
				failures = append(failures, err)
			}
		})
	}
	wg.Wait()
	if updated != 1 || len(failures) > 0 {
		t.Errorf("%d concurrent updates of version 1: %d succeeded, errors %v; want 1 and ErrConflict for the others", n, updated, failures)
	}
	got, err := st.GetEntry(t.Context(), store.KindAgent, "alice", "racer")
	if err != nil || got.Version != 2 {
		t.Errorf("after the race: %+v, %v; want version 2", got, err)
	}
}
