package session

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hrns-dev/hrns/store"
)

// FuzzRegistryParse feeds arbitrary bodies to the registries' validation
// ([Manager.ParseEntry]):
// it never panics, refuses with a *ValidationError, and what it accepts
// it accepts again unchanged (the stored form is a fixed point).
func FuzzRegistryParse(f *testing.F) {
	for _, seed := range []string{
		`{"name":"acme/support","description":"d","environments":["web",{"id":"x","kind":"web","mode":{"type":"text","chunk_size":5}}],"skills":["s",{"name":"t","description":"d","body":"b","files":{"a/b.md":"x"}}],"subagents":[{"name":"c","description":"d","environments":[]}],"tools":[{"name":"t","description":"d","input_schema":{"type":"object"}}],"answer_format":{"type":"object"},"max_steps":3}`,
		`{"id":"shop/x","kind":"web","host":"cloud","network":{"managed_proxy":{"pool":"isp","country":"US"}},"vault_id":"3f0e6a2c-8a5b-4c1e-9d7f-0a1b2c3d4e5f"}`,
		`{"id":"pc","kind":"desktop","host":"user_device","start_url":"dropped"}`,
		`{"name":"s","description":"d","body":"b","source":null,"url_pattern":"x","files":{"../x":"y"}}`,
		`[]`, `null`, `{"name":1}`, `{"environments":[null]}`,
	} {
		for kind := range 3 {
			f.Add(uint8(kind), []byte(seed))
		}
	}
	m := &Manager{}
	kinds := []string{store.KindAgent, store.KindEnvironment, store.KindSkill}
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		kind := kinds[int(k)%len(kinds)]
		e, err := m.ParseEntry(kind, "alice", body)
		if err != nil {
			if _, ok := errors.AsType[*ValidationError](err); !ok {
				t.Fatalf("parse(%s, %q) = %v, not a validation error", kind, body, err)
			}
			return
		}
		again, err := m.ParseEntry(kind, "alice", EntryDoc(e))
		if err != nil {
			t.Fatalf("parse accepted %q as %s but refuses it: %v", body, EntryDoc(e), err)
		}
		if !bytes.Equal(again.Spec, e.Spec) || !bytes.Equal(again.Files, e.Files) || again.Name != e.Name || again.Type != e.Type {
			t.Fatalf("not a fixed point:\n%s\n%s", e.Spec, again.Spec)
		}
	})
}
