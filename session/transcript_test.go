package session_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

const transcriptAgent = `{"agent":{"name":"a","system":"be brief","tools":[{"name":"lookup","description":"d"}]},"messages":"go"}`

// storedState returns the session's stored state as a generic document.
func storedState(t *testing.T, st store.Store, id string) (*store.Session, map[string]any) {
	t.Helper()
	s, err := st.GetSession(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(s.State, &doc); err != nil {
		t.Fatal(err)
	}
	return s, doc
}

func storedMessages(t *testing.T, st store.Store, id string) []llm.Message {
	t.Helper()
	raw, err := st.Messages(t.Context(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]llm.Message, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func post(t *testing.T, m *session.Manager, id, callID, result string) {
	t.Helper()
	err := m.PostToolResults(t.Context(), owner, id, []session.ToolResult{{Kind: "tool_result", ToolReq: session.ToolRequest{ID: callID}, Result: json.RawMessage(result)}})
	if err != nil {
		t.Fatalf("posting the result of %s: %v", callID, err)
	}
}

// TestTranscriptAppended: each step appends its messages to the stored
// transcript, the state holds none of them, and the model is given the
// whole conversation.
func TestTranscriptAppended(t *testing.T) {
	st := openStore(t)
	model := llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`), llmtest.Call("c2", "lookup", `{}`), llmtest.Text("done"))
	m := startManager(t, st, model, nil)
	v := create(t, m, transcriptAgent)
	f := &follower{t: t, m: m, id: v.ID}

	// system, user, assistant(c1)
	f.status(session.StatusAwaitingToolResults)
	if got := storedMessages(t, st, v.ID); len(got) != 3 || got[2].ToolCalls()[0].ID != "c1" {
		t.Fatalf("stored transcript after the first step: %+v", got)
	}
	first := storedMessages(t, st, v.ID)
	post(t, m, v.ID, "c1", `"one"`)
	f.until(func(c *session.Changes) bool {
		return c.Status == session.StatusAwaitingToolResults && c.Metrics.Steps == 2
	})
	// A retry of c1's result, which the run has used: ignored (the
	// transcript in the store says it was answered).
	post(t, m, v.ID, "c1", `"one"`)
	got := storedMessages(t, st, v.ID)
	if len(got) != 5 {
		t.Fatalf("stored transcript after the second step has %d messages, want 5", len(got))
	}
	if diff := cmp.Diff(first, got[:3]); diff != "" {
		t.Errorf("the second step changed the stored messages (-before +after):\n%s", diff)
	}
	s, doc := storedState(t, st, v.ID)
	cp := doc["checkpoint"].(map[string]any)
	if _, ok := cp["messages"]; ok || cp["length"] != float64(5) {
		t.Errorf("checkpoint %v, want length 5 and no inline messages", cp)
	}
	if strings.Contains(string(s.State), "be brief") {
		t.Errorf("the state holds the transcript: %s", s.State)
	}
	post(t, m, v.ID, "c2", `"two"`)
	f.status(session.StatusCompleted)

	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	got = storedMessages(t, st, v.ID)
	if diff := cmp.Diff(last, got[:len(last)]); diff != "" {
		t.Errorf("the stored transcript is not what the model read (-model +stored):\n%s", diff)
	}
	if len(got) != len(last)+1 || got[len(got)-1].Text() != "done" {
		t.Errorf("stored transcript ends with %+v, want the answer", got[len(got)-1])
	}
}

// TestOldFormatSessionResumes: a session stored before transcripts had
// rows of their own (the whole transcript inline in the state) resumes
// with its conversation, and its first commit moves the transcript to the
// store.
func TestOldFormatSessionResumes(t *testing.T) {
	st := openStore(t)
	model := llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`), llmtest.Call("c2", "lookup", `{}`), llmtest.Text("done"))
	m := startManager(t, st, model, nil)
	v := create(t, m, transcriptAgent)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	post(t, m, v.ID, "c1", `"one"`)
	f.until(func(c *session.Changes) bool {
		return c.Status == session.StatusAwaitingToolResults && c.Metrics.Steps == 2
	})

	// Rewrite it as the previous version stored it: the checkpoint's
	// messages inline, no rows.
	s, doc := storedState(t, st, v.ID)
	raw, err := st.Messages(t.Context(), v.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := storedMessages(t, st, v.ID)
	cp := doc["checkpoint"].(map[string]any)
	delete(cp, "length")
	inline, _ := json.Marshal(raw)
	cp["messages"] = json.RawMessage(inline)
	if s.State, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateSession(t.Context(), s, nil, &store.UpdateOptions{Transcript: &store.Transcript{From: 0}}); err != nil {
		t.Fatal(err)
	}
	if got := storedMessages(t, st, v.ID); len(got) != 0 {
		t.Fatalf("%d messages left in the store", len(got))
	}

	// The call c1's result was used: a retry is still recognised.
	post(t, m, v.ID, "c1", `"one"`)
	post(t, m, v.ID, "c2", `"two"`)
	f.status(session.StatusCompleted)
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	if diff := cmp.Diff(want, last[:len(want)]); diff != "" {
		t.Errorf("the resumed run did not continue the old conversation (-old +model):\n%s", diff)
	}
	got := storedMessages(t, st, v.ID)
	if diff := cmp.Diff(last, got[:len(last)]); diff != "" {
		t.Errorf("stored transcript after the resume (-model +stored):\n%s", diff)
	}
	_, doc = storedState(t, st, v.ID)
	if cp := doc["checkpoint"].(map[string]any); cp["messages"] != nil || cp["length"] != float64(len(got)) {
		t.Errorf("checkpoint after the resume: %v, want length %d and no inline messages", cp, len(got))
	}
}

// TestTranscriptRestart: a manager that did not commit the transcript
// (a restart, another replica) reads it from the store; one whose stored
// transcript lost messages fails the session saying so, and loses
// nothing of its log.
func TestTranscriptRestart(t *testing.T) {
	for _, tt := range []struct {
		name string
		trim bool
	}{{"intact", false}, {"truncated", true}} {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			m1 := startManager(t, st, llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`)), nil)
			v := create(t, m1, transcriptAgent)
			f := &follower{t: t, m: m1, id: v.ID}
			f.status(session.StatusAwaitingToolResults)
			if err := m1.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			want := storedMessages(t, st, v.ID)
			if tt.trim {
				s, _ := st.GetSession(t.Context(), v.ID)
				if err := st.UpdateSession(t.Context(), s, nil, &store.UpdateOptions{Transcript: &store.Transcript{From: 1}}); err != nil {
					t.Fatal(err)
				}
			}
			model := llmtest.NewModel(llmtest.Text("done"))
			m2 := startManager(t, st, model, nil)
			f.m = m2
			post(t, m2, v.ID, "c1", `"one"`)
			if tt.trim {
				c := f.status(session.StatusFailed)
				if c.Error == nil || !strings.Contains(*c.Error, "corrupt transcript: 1 messages stored, the checkpoint continues from 3") {
					t.Errorf("error %v, want it to say the transcript is short", c.Error)
				}
				if len(model.Requests()) != 0 {
					t.Errorf("the model was asked with a broken transcript")
				}
				return
			}
			f.status(session.StatusCompleted)
			reqs := model.Requests()
			if diff := cmp.Diff(want, reqs[0].Messages[:len(want)]); diff != "" {
				t.Errorf("the new manager's run did not continue the stored conversation (-stored +model):\n%s", diff)
			}
		})
	}
}

// commitLog records the events of each committed update.
type commitLog struct {
	store.Store
	mu      sync.Mutex
	commits [][]store.Event
}

// UpdateSession records the events of each commit from the store's
// Committed callback, which the store calls before it notifies the
// session's subscribers (store.UpdateOptions.Committed): whoever learns
// of a commit (a long-poll, a follower) finds it recorded.
func (c *commitLog) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	var o store.UpdateOptions
	if opts != nil {
		o = *opts
	}
	next := o.Committed
	o.Committed = func(s *store.Session, events []store.Event) {
		c.mu.Lock()
		c.commits = append(c.commits, slices.Clone(events))
		c.mu.Unlock()
		if next != nil {
			next(s, events)
		}
	}
	return c.Store.UpdateSession(ctx, s, events, &o)
}

// TestClientStepCommittedWithSuspension: a step whose calls all wait for
// the caller is committed in one transaction with the suspension that
// follows it (its policy_event, metrics and the wait together).
func TestClientStepCommittedWithSuspension(t *testing.T) {
	st := &commitLog{Store: openStore(t)}
	m := startManager(t, st, llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`), llmtest.Text("done")), nil)
	v := create(t, m, transcriptAgent)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	st.mu.Lock()
	defer st.mu.Unlock()
	var found []string
	for _, events := range st.commits {
		for _, e := range events {
			if e.Type == session.EventAgent && strings.Contains(string(e.Data), `"policy_event"`) {
				for _, e := range events {
					found = append(found, e.Type)
				}
			}
		}
	}
	want := []string{session.EventAgent, session.EventMetricsUpdate, session.EventActiveState}
	if diff := cmp.Diff(want, found); diff != "" {
		t.Errorf("the commit of the step holds (-want +got):\n%s", diff)
	}
}
