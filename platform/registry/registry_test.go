package registry_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/platform/registry"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

const owner = "alice"

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// The work a registry does for one request is bounded: entries per key,
// references looked up per check, definitions added by resolve.
func TestRegistryBounds(t *testing.T) {
	m := session.New(openStore(t), llmtest.NewModel(), nil)
	reg := registry.New(m)
	ctx := t.Context()

	// At most 256 distinct references, inline subagents included.
	var subs []string
	for i := range 5 {
		var skills []string
		for j := range 60 {
			skills = append(skills, fmt.Sprintf("%q", fmt.Sprintf("s%d-%d", i, j)))
		}
		subs = append(subs, fmt.Sprintf(`{"name":"sub%d","description":"d","environments":[],"skills":[%s]}`, i, strings.Join(skills, ",")))
	}
	_, err := reg.Create(ctx, registry.EntryAgent, owner, []byte(`{"name":"big","description":"d","environments":[],"subagents":[`+strings.Join(subs, ",")+`]}`))
	if err == nil || !strings.Contains(err.Error(), "at most 256 distinct entries") {
		t.Errorf("an agent naming 300 entries: %v", err)
	}

	// resolve adds at most so many bytes of definitions; the rest stay
	// names.
	registry.SetRegistryBounds(t, 1000, 8<<10)
	body := strings.Repeat("x", 3<<10)
	var names []string
	for i := range 3 {
		name := fmt.Sprintf("large%d", i)
		names = append(names, fmt.Sprintf("%q", name))
		if _, err := reg.Create(ctx, registry.EntrySkill, owner, []byte(fmt.Sprintf(`{"name":%q,"description":"d","body":%q}`, name, body))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.Create(ctx, registry.EntryAgent, owner, []byte(`{"name":"reader","description":"d","environments":[],"skills":[`+strings.Join(names, ",")+`]}`)); err != nil {
		t.Fatal(err)
	}
	doc, err := reg.Get(ctx, registry.EntryAgent, owner, "reader", true)
	if err != nil {
		t.Fatal(err)
	}
	var a session.AgentSpec
	json.Unmarshal(doc, &a)
	resolved := 0
	for _, s := range a.Skills {
		if s[0] == '{' {
			resolved++
		}
	}
	if len(a.Skills) != 3 || resolved != 2 || len(doc) > 9<<10 {
		t.Errorf("resolved %d of %d skills, %d bytes; want 2 of 3 within 9 KiB", resolved, len(a.Skills), len(doc))
	}
}

// A key registers a bounded number of entries of a kind (1000; 20 here).
func TestRegistryEntriesPerKey(t *testing.T) {
	registry.SetRegistryBounds(t, 20, 8<<20)
	m := session.New(openStore(t), llmtest.NewModel(), nil)
	reg := registry.New(m)
	for i := range 20 {
		if _, err := reg.Create(t.Context(), registry.EntryEnvironment, owner, []byte(fmt.Sprintf(`{"id":"e%d"}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.Create(t.Context(), registry.EntryEnvironment, owner, []byte(`{"id":"one-more"}`)); !errors.Is(err, registry.ErrTooManyEntries) {
		t.Errorf("the 21st environment: %v, want ErrTooManyEntries", err)
	}
	if _, err := reg.Create(t.Context(), registry.EntryEnvironment, "bob", []byte(`{"id":"one-more"}`)); err != nil {
		t.Errorf("another key's first environment: %v", err)
	}
}
