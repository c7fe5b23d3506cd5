package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/store"
)

var transcriptTests = []struct {
	name string
	fn   func(t *testing.T, st store.Store)
}{
	{"Transcript", testTranscript},
	{"TranscriptRejected", testTranscriptRejected},
}

func msgs(from, to int) []json.RawMessage {
	var out []json.RawMessage
	for i := from; i < to; i++ {
		out = append(out, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
	}
	return out
}

// update commits a transcript change to the session as read now.
func updateTranscript(t *testing.T, st store.Store, id string, tr *store.Transcript) error {
	t.Helper()
	s, err := st.GetSession(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st.UpdateSession(t.Context(), s, []store.Event{ev("T", `{}`)}, &store.UpdateOptions{Transcript: tr})
}

func wantMessages(t *testing.T, st store.Store, id string, from int64, limit int, want []json.RawMessage) {
	t.Helper()
	got, err := st.Messages(t.Context(), id, from, limit)
	if err != nil {
		t.Fatalf("Messages(%s, %d, %d): %v", id, from, limit, err)
	}
	if diff := cmp.Diff(want, got, cmpSession); diff != "" {
		t.Errorf("Messages(%s, %d, %d) (-want +got):\n%s", id, from, limit, diff)
	}
}

// testTranscript appends to, reads and rewrites the tail of transcripts.
func testTranscript(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreate(t, st, newSession("s", "alice"))
	mustCreate(t, st, newSession("other", "alice"))
	wantMessages(t, st, "s", 0, 0, nil)

	// Appends: each writes only its messages, numbered after the stored.
	if err := updateTranscript(t, st, "s", &store.Transcript{From: 0, Messages: msgs(0, 3)}); err != nil {
		t.Fatal(err)
	}
	if err := updateTranscript(t, st, "s", &store.Transcript{From: 3, Messages: msgs(3, 5)}); err != nil {
		t.Fatal(err)
	}
	if err := updateTranscript(t, st, "other", &store.Transcript{From: 0, Messages: msgs(100, 101)}); err != nil {
		t.Fatal(err)
	}
	// An update without a transcript change leaves it alone.
	if err := updateTranscript(t, st, "s", nil); err != nil {
		t.Fatal(err)
	}
	// Appending nothing is a change that changes nothing.
	if err := updateTranscript(t, st, "s", &store.Transcript{From: 5}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		from  int64
		limit int
		want  []json.RawMessage
	}{
		{0, 0, msgs(0, 5)},
		{0, 2, msgs(0, 2)},
		{3, 0, msgs(3, 5)},
		{4, 10, msgs(4, 5)},
		{5, 0, nil},
		{42, 1, nil},
	}
	for _, tt := range tests {
		wantMessages(t, st, "s", tt.from, tt.limit, tt.want)
	}
	wantMessages(t, st, "other", 0, 0, msgs(100, 101))

	// Rewriting from inside the transcript replaces the tail: shorter...
	if err := updateTranscript(t, st, "s", &store.Transcript{From: 2, Messages: msgs(20, 21)}); err != nil {
		t.Fatal(err)
	}
	wantMessages(t, st, "s", 0, 0, append(msgs(0, 2), msgs(20, 21)...))
	// ...or longer, from the start.
	if err := updateTranscript(t, st, "s", &store.Transcript{From: 0, Messages: msgs(30, 34)}); err != nil {
		t.Fatal(err)
	}
	wantMessages(t, st, "s", 0, 0, msgs(30, 34))

	s, _ := st.GetSession(ctx, "s")
	if s.EventCount != 6 {
		t.Errorf("event count %d after 6 updates, want 6", s.EventCount)
	}
	if _, err := st.Messages(ctx, "nope", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Messages(unknown) = %v, want ErrNotFound", err)
	}
}

// testTranscriptRejected: a change that would leave a gap, or comes from a
// stale read or a lost lease, writes nothing.
func testTranscriptRejected(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreate(t, st, newSession("s", "alice"))
	if err := updateTranscript(t, st, "s", &store.Transcript{From: 0, Messages: msgs(0, 2)}); err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{3, 42, -1} {
		err := updateTranscript(t, st, "s", &store.Transcript{From: from, Messages: msgs(9, 10)})
		if !errors.Is(err, store.ErrTranscriptGap) {
			t.Errorf("transcript from %d after 2 messages = %v, want ErrTranscriptGap", from, err)
		}
	}
	stale, _ := st.GetSession(ctx, "s")
	if err := updateTranscript(t, st, "s", &store.Transcript{From: 2, Messages: msgs(2, 3)}); err != nil {
		t.Fatal(err)
	}
	err := st.UpdateSession(ctx, stale, nil, &store.UpdateOptions{Transcript: &store.Transcript{From: 0, Messages: msgs(7, 8)}})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("transcript change from a stale read = %v, want ErrConflict", err)
	}
	cur, _ := st.GetSession(ctx, "s")
	err = st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Lease: "w", Transcript: &store.Transcript{From: 3, Messages: msgs(3, 4)}})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("transcript change without the lease = %v, want ErrLeaseLost", err)
	}
	s, _ := st.GetSession(ctx, "s")
	if s.EventCount != 2 {
		t.Errorf("event count %d, want 2: a rejected change wrote events", s.EventCount)
	}
	wantMessages(t, st, "s", 0, 0, msgs(0, 3))
}
