package micro

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/hrns-dev/hrns/bench/internal/mock"
	"github.com/hrns-dev/hrns/bench/internal/raw"
	"github.com/hrns-dev/hrns/bench/internal/task"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
)

// BenchmarkTinyTask does one run of the task matrix's tiny shape per op (5
// calls with results of about 45 B, then an answer in 20 chunks: 6 turns)
// against the mock over loopback HTTP in the same process, with the raw
// baseline and with the loop as bench/cmd/hrnsloop builds it. It is the
// shape where a fixed cost of a turn or of a call shows most; its
// allocs/op and cpu-ns/turn include the mock's, the same for both.
func BenchmarkTinyTask(b *testing.B) {
	const resultBytes = 1
	srv := mock.New(&mock.Options{ToolCalls: 5, ArgChunks: 8, TextChunks: 20})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	base := ts.URL + "/v1"
	ctx := context.Background()
	turns := 6
	b.Run("raw", func(b *testing.B) {
		c := &raw.Client{BaseURL: base, Model: "bench-model", ResultBytes: resultBytes}
		m := startMeter(b)
		for b.Loop() {
			if _, err := c.Run(ctx); err != nil {
				b.Fatal(err)
			}
		}
		m.report(turns, "turn")
	})
	b.Run("hrns", func(b *testing.B) {
		client := &openai.Client{BaseURL: base, APIKey: "bench", Model: "bench-model"}
		read := loop.NewTool(task.ToolName, task.Description, func(_ context.Context, in task.Args) (string, error) {
			return task.Result(in.Path, resultBytes), nil
		})
		agent := loop.NewAgent(client, loop.MustToolset(read), &loop.Options{MaxTurns: 1000})
		msgs := []llm.Message{llm.SystemMessage(task.System), llm.UserMessage(task.Prompt)}
		m := startMeter(b)
		for b.Loop() {
			if _, err := agent.Run(ctx, msgs); err != nil {
				b.Fatal(err)
			}
		}
		m.report(turns, "turn")
	})
}
