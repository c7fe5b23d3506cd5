package session

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/store"
)

// handOvers counts the states handed over to a worker in the package's
// tests, and keeps those that differ from a decoding of their encoding.
var handOvers struct {
	sync.Mutex
	n      int
	differ []string
}

// TestMain checks, in every test of the package, each state a caller's
// input hands over to the worker it claims (see handOver) against a
// decoding of the state's encoding: the run must be the same either way.
// Not when benchmarks run: they count the decodes.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		handOverCheck = checkHandOver
	}
	code := m.Run()
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "%d states handed over to a worker, checked\n", handOvers.n)
	}
	if len(handOvers.differ) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d of %d states handed over to a worker differ from their encoding decoded:\n", len(handOvers.differ), handOvers.n)
		for i, d := range handOvers.differ {
			if i == 5 {
				break
			}
			fmt.Fprintln(os.Stderr, d)
		}
		code = 1
	}
	os.Exit(code)
}

func checkHandOver(s *store.Session, st *state) {
	d, err := decodeState(s)
	handOvers.Lock()
	defer handOvers.Unlock()
	handOvers.n++
	switch {
	case err != nil:
		handOvers.differ = append(handOvers.differ, fmt.Sprintf("session %s: %v", s.ID, err))
	case !reflect.DeepEqual(st, d):
		handOvers.differ = append(handOvers.differ, fmt.Sprintf("session %s:\nhanded  %#v\ndecoded %#v", s.ID, *st, *d))
	}
}

// TestKeptStates checks that a kept state is given once, and only to a
// commit that starts from the very encoding it was kept for.
func TestKeptStates(t *testing.T) {
	enc := []byte(`{"spec":{"agent":"a"},"phase":"wait","steps":1,"inbox":[]}`)
	s := &store.Session{ID: "a", Status: string(StatusAwaitingToolResults), State: enc}
	decode := func() *state {
		st, err := decodeState(s)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	k := newKeptStates(1 << 20)
	st := decode()
	k.put(s, st)
	if got := k.take(s); got != st {
		t.Fatalf("take = %p, want the state kept, %p", got, st)
	}
	if got := k.take(s); got != nil {
		t.Fatal("a kept state was given twice")
	}
	k.put(s, decode())
	same := &store.Session{ID: "a", State: append([]byte(nil), enc...)} // equal bytes, not the ones committed
	if k.take(same) != nil {
		t.Fatal("a state was given for a copy of its encoding")
	}
	if k.take(s) != nil {
		t.Fatal("a state was kept after a take for another encoding")
	}
	odd := &store.Session{ID: "b", State: []byte(`{"spec":{"agent":"a"},"phase":"wait","share_secret":"\ufffd"}`)}
	st, err := decodeState(odd)
	if err != nil {
		t.Fatal(err)
	}
	k.put(odd, st)
	if k.take(odd) != nil {
		t.Fatal("a state holding text that was not UTF-8 was kept")
	}
}

// TestHandOverEmptyMedia: a state holding media whose bytes are empty but
// not nil, in a message of its inbox or in a result of its checkpoint, is
// not handed over (handOver gives nil and the worker decodes the state),
// since its encoding leaves the bytes out and decoding gives nil: the
// state handed over would differ from the one decoded. No input of the
// API puts such media in a state any more (an empty image or file is
// 422), but a state written before that, or the result of an operator's
// server-side tool, may hold them; so the state is built here. The same
// states with bytes are handed over, equal to their decoding.
func TestHandOverEmptyMedia(t *testing.T) {
	for _, c := range []struct {
		name string
		put  func(st *state, media []byte)
	}{
		{"inbox", func(st *state, media []byte) {
			st.Inbox = []inboxMessage{{ID: 1, Message: llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("look"), llm.ImagePart("image/png", media)}}}}
		}},
		{"checkpoint", func(st *state, media []byte) {
			st.Checkpoint.Calls = []callState{{Call: llm.ToolCall{ID: "c1", Name: "look", Arguments: llm.Arguments(`{}`)},
				Result: &llm.ToolResult{CallID: "c1", Name: "look", Content: []llm.Part{llm.TextPart("seen"), llm.ImagePart("image/png", media)}}}}
		}},
	} {
		for _, media := range [][]byte{{}, []byte("\x89PNG")} {
			t.Run(fmt.Sprintf("%s/%d bytes", c.name, len(media)), func(t *testing.T) {
				s := &store.Session{ID: "a", Status: string(StatusAwaitingToolResults), State: []byte(`{"spec":{"agent":"a"},"phase":"wait","steps":1}`)}
				st, err := decodeState(s)
				if err != nil {
					t.Fatal(err)
				}
				c.put(st, media)
				if s.State, err = json.Marshal(st); err != nil {
					t.Fatal(err)
				}
				decoded, err := decodeState(s)
				if err != nil {
					t.Fatal(err)
				}
				got := handOver(s, st)
				switch {
				case len(media) == 0 && got != nil:
					t.Fatal("a state with empty media was handed over")
				case len(media) == 0 && reflect.DeepEqual(st, decoded):
					t.Fatal("the state with empty media is its decoding: the test no longer shows why it is not handed over")
				case len(media) > 0 && got == nil:
					t.Fatal("a state with media was not handed over")
				case len(media) > 0 && !reflect.DeepEqual(got, decoded):
					t.Fatalf("handed over %#v\ndecoded %#v", *got, *decoded)
				}
			})
		}
	}
}
