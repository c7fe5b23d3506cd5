package replay_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/llm/replay"
	"github.com/hrns-dev/hrns/loop"
)

func TestRecordThenReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session.jsonl")
	calls := 0
	counter := loop.NewSimpleTool("Counts calls.", nil, func(map[string]any) string {
		calls++
		return "called"
	})
	tools := map[string]loop.Tool{"count": counter}
	model := llmtest.NewModel(
		llmtest.Reply{Reasoning: "I will count.", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "count", Arguments: []byte(`{}`)}}},
		llmtest.Text("Counted once."),
	)
	rec, err := replay.Create(path, model, "scripted")
	if err != nil {
		t.Fatal(err)
	}
	first, err := loop.New(rec, tools).Run(t.Context(), []llm.Message{llm.UserMessage("count")})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	player, err := replay.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if player.Model != "scripted" || player.Remaining() != 2 {
		t.Fatalf("player: model %q, %d responses", player.Model, player.Remaining())
	}
	second, err := loop.New(player, tools).Run(t.Context(), []llm.Message{llm.UserMessage("count")})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("the tool ran %d times, want once per run", calls)
	}
	if diff := cmp.Diff(first.Messages, second.Messages); diff != "" {
		t.Errorf("replayed transcript differs (-recorded +replayed):\n%s", diff)
	}
	if diff := cmp.Diff(first.Usage, second.Usage); diff != "" {
		t.Errorf("usage (-recorded +replayed):\n%s", diff)
	}
	_, err = llm.Collect(player.Stream(context.Background(), &llm.Request{}))
	if !errors.Is(err, replay.ErrExhausted) {
		t.Errorf("past the end: err = %v", err)
	}
}

func TestOpenRejectsBadFiles(t *testing.T) {
	tests := []struct{ name, content, want string }{
		{"empty", "", "is empty"},
		{"not a recording", `{"foo":1}` + "\n", "not an hrns recording"},
		{"newer version", `{"hrns_replay":99}` + "\n", "newer"},
		{"bad line", `{"hrns_replay":1}` + "\n" + `{"response":` + "\n", ":2: not a recorded response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.jsonl")
			os.WriteFile(path, []byte(tt.content), 0o644)
			_, err := replay.Open(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	if _, err := replay.Open(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
}
