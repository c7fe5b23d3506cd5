package session

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hrns-dev/hrns/store"
)

// TestSpecDecodedOnce: a state's spec is decoded once per encoding and
// written back byte for byte, and the state reads as it did when the
// spec was decoded each time.
func TestSpecDecodedOnce(t *testing.T) {
	sp := &spec{Agent: "support", System: "Be brief.", Model: "m", MaxSteps: 9,
		ClientTools: []ToolDefinition{{Name: "get_order", Description: "Look up an order.", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	plain, err := json.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(agentSpec{spec: sp}); !bytes.Equal(got, plain) {
		t.Fatalf("a new spec encodes as\n%s\nnot as the spec itself:\n%s", got, plain)
	}
	raw, err := json.Marshal(&state{Spec: agentSpec{spec: sp}, Phase: phaseWait, Steps: 3})
	if err != nil {
		t.Fatal(err)
	}
	a, err := decodeState(&store.Session{ID: "a", State: raw})
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeState(&store.Session{ID: "b", State: raw})
	if err != nil {
		t.Fatal(err)
	}
	if a.Spec.spec != b.Spec.spec {
		t.Error("the same encoding was decoded twice")
	}
	if a.Spec.Agent != "support" || a.Spec.MaxSteps != 9 || len(a.Spec.ClientTools) != 1 || a.Phase != phaseWait || a.Steps != 3 {
		t.Errorf("decoded state = %+v, spec %+v", a, a.Spec.spec)
	}
	a.Steps = 4
	again, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Replace(raw, []byte(`"steps":3`), []byte(`"steps":4`), 1); !bytes.Equal(again, want) {
		t.Errorf("re-encoded state\n%s\nwant\n%s", again, want)
	}

	// Another spec is another entry; a corrupt one is an error each time.
	other := bytes.Replace(raw, []byte(`"max_steps":9`), []byte(`"max_steps":10`), 1)
	c, err := decodeState(&store.Session{ID: "c", State: other})
	if err != nil || c.Spec.spec == a.Spec.spec || c.Spec.MaxSteps != 10 {
		t.Errorf("another spec decoded as %+v, %v", c.Spec.spec, err)
	}
	corrupt := bytes.Replace(raw, []byte(`"max_steps":9`), []byte(`"max_steps":"nine"`), 1)
	for range 2 {
		if _, err := decodeState(&store.Session{ID: "d", State: corrupt}); err == nil {
			t.Error("a corrupt spec was decoded")
		}
	}
	if _, err := decodeState(&store.Session{ID: "e", State: json.RawMessage(`{"spec":null,"phase":"wait"}`)}); err == nil {
		t.Error("a state without a spec was decoded")
	}
}
