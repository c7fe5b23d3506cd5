package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// retriedAnswer is a run whose first request fails after part of the
// answer was streamed, and whose second attempt streams it whole.
func retriedAnswer() []loop.Chunk {
	return []loop.Chunk{
		{Type: loop.ChunkTurnStart, Turn: 1},
		{Type: loop.ChunkMessage, Turn: 1, Content: "The full answer "},
		{Type: loop.ChunkMessage, Turn: 1, Content: "is forty"},
		{Type: loop.ChunkRetry, Turn: 1, Retry: &loop.RetryInfo{Attempt: 1, Delay: time.Millisecond}, Err: errors.New("stream cut")},
		{Type: loop.ChunkMessage, Turn: 1, Content: "The full answer "},
		{Type: loop.ChunkMessage, Turn: 1, Content: "is forty-two."},
		{Type: loop.ChunkTurnEnd, Turn: 1, Usage: &llm.Usage{}, FinishReason: llm.FinishStop},
		{Type: loop.ChunkEnd, Result: &loop.Result{Status: loop.StatusCompleted, Answer: "The full answer is forty-two."}},
	}
}

func render(stream bool, chunks []loop.Chunk) (out, log string) {
	var o, l bytes.Buffer
	r := newTextRenderer(&o, &l, stream)
	for _, c := range chunks {
		r.chunk(c)
	}
	return o.String(), l.String()
}

func TestAnswerOnceAfterARetry(t *testing.T) {
	t.Run("redirected", func(t *testing.T) {
		out, log := render(false, retriedAnswer())
		if out != "The full answer is forty-two.\n" {
			t.Errorf("stdout = %q, want the answer once", out)
		}
		if !strings.Contains(log, "retrying in") {
			t.Errorf("the retry is not told:\n%s", log)
		}
	})
	t.Run("terminal", func(t *testing.T) {
		out, log := render(true, retriedAnswer())
		if out != "The full answer is forty\nThe full answer is forty-two.\n" {
			t.Errorf("stdout = %q", out)
		}
		if !strings.Contains(log, "cut off") || !strings.Contains(log, "retrying in") {
			t.Errorf("the retry is not shown:\n%s", log)
		}
	})
	t.Run("failed stream is not an answer", func(t *testing.T) {
		chunks := retriedAnswer()[:3]
		chunks = append(chunks, loop.Chunk{Type: loop.ChunkEnd, Result: &loop.Result{Status: loop.StatusFailed, Err: errors.New("gone")}})
		out, log := render(false, chunks)
		if out != "" || !strings.Contains(log, "not written to stdout") {
			t.Errorf("stdout %q\nstderr %s", out, log)
		}
	})
}

func TestTerminalOutputIsEscaped(t *testing.T) {
	out, log := render(true, []loop.Chunk{
		{Type: loop.ChunkTurnStart, Turn: 1},
		{Type: loop.ChunkReasoning, Turn: 1, Content: "think\x1b]0;owned\x07"},
		{Type: loop.ChunkMessage, Turn: 1, Content: "line one\n\tline two\r\x1b[2KAllow? [y]es"},
		{Type: loop.ChunkTurnEnd, Turn: 1, Usage: &llm.Usage{}},
		{Type: loop.ChunkToolCallStart, ToolCall: &loop.ToolCallInfo{Name: "evil\x1b[2K", Arguments: []byte(`{"a":"\u202e"}`)}},
		{Type: loop.ChunkToolCallResult, ToolCall: &loop.ToolCallInfo{Name: "evil\x1b[2K"}, Content: "ok\r\x1b[1A"},
		{Type: loop.ChunkEnd, Result: &loop.Result{Status: loop.StatusCompleted}},
	})
	if want := "line one\n\tline two\\r\\x1b[2KAllow? [y]es\n"; out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	if strings.ContainsAny(log, "\x1b\r\x07\u202e") {
		t.Errorf("stderr holds controls: %q", log)
	}
	for _, want := range []string{`think\x1b]0;owned\a`, `→ evil\x1b[2K {"a":"\u202e"}`, `✓ evil\x1b[2K: ok\r\x1b[1A`} {
		if !strings.Contains(log, want) {
			t.Errorf("stderr lacks %q:\n%s", want, log)
		}
	}
}

// A stream cut after part of the answer, then the whole answer, through the
// real command and the OpenAI wire format: redirected stdout holds the
// answer once.
func TestRunRetryAfterPartialAnswer(t *testing.T) {
	partial := "data: " + `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"The full answer is forty"},"finish_reason":null}]}` + "\n\n"
	srv := openaitest.NewServer(
		openaitest.Reply{Raw: partial}, // the stream ends without [DONE]: retried
		openaitest.Reply{Text: "The full answer is forty-two."},
	)
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := Run(t.Context(), []string{"run", "--base-url", srv.URL(), "--model", "m", "--tools", "none", "--no-skills", "--workdir", t.TempDir(), "what is it?"},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	if got := out.String(); got != "The full answer is forty-two.\n" {
		t.Errorf("stdout = %q, want the answer exactly once", got)
	}
	if len(srv.Requests()) != 2 || !strings.Contains(errOut.String(), "retrying in") {
		t.Errorf("%d requests; stderr:\n%s", len(srv.Requests()), errOut.String())
	}
}

func TestRenderSummaryAndCost(t *testing.T) {
	var out, log bytes.Buffer
	r := newTextRenderer(&out, &log, false)
	r.configure("gpt-4.1", &Config{}, &IO{Err: &log})
	read := &loop.ToolCallInfo{ID: "a", Name: "read_file", Arguments: []byte(`{"path":"go.mod"}`)}
	list := &loop.ToolCallInfo{ID: "b", Name: "list_files", Arguments: []byte(`{"path":"."}`)}
	for _, c := range []loop.Chunk{
		{Type: loop.ChunkTurnStart, Turn: 1},
		{Type: loop.ChunkToolCallStart, ToolCall: read},
		{Type: loop.ChunkToolCallStart, ToolCall: list},
		{Type: loop.ChunkToolCallResult, ToolCall: read, Content: "1\tmodule x\n2\t\n3\tgo 1.26\n"},
		{Type: loop.ChunkToolCallResult, ToolCall: list, Content: "a.go"},
		{Type: loop.ChunkEnd, Result: &loop.Result{Status: loop.StatusCompleted, Turns: make([]loop.TurnInfo, 1),
			Usage: llm.Usage{InputTokens: 1_000_000, CacheReadTokens: 500_000, OutputTokens: 100_000}}},
	} {
		r.chunk(c)
	}
	r.close()
	for _, want := range []string{"  ✓ read_file go.mod: 3 lines\n", "  ✓ list_files .: a.go\n",
		"— completed in 1 turn, 1000000 input (500000 cached) + 100000 output tokens, $2.05\n"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, log.String())
		}
	}
	log.Reset()
	r = newTextRenderer(&out, &log, false)
	r.configure("my-local-model", &Config{}, &IO{Err: &log})
	r.chunk(loop.Chunk{Type: loop.ChunkEnd, Result: &loop.Result{Status: loop.StatusCompleted, Turns: make([]loop.TurnInfo, 2)}})
	if !strings.Contains(log.String(), "completed in 2 turns, 0 input + 0 output tokens, unknown price") {
		t.Errorf("stderr: %s", log.String())
	}
}

func TestRenderProgress(t *testing.T) {
	var out, log bytes.Buffer
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	r := newTextRenderer(&out, &log, true)
	r.prog = &progress{w: &log}
	r.now = func() time.Time { return now }
	r.chunk(loop.Chunk{Type: loop.ChunkTurnStart, Turn: 1})
	r.prog.tick(t0.Add(500 * time.Millisecond))
	if log.Len() != 0 {
		t.Errorf("a progress line before a second: %q", log.String())
	}
	r.prog.tick(t0.Add(3 * time.Second))
	if !strings.HasSuffix(log.String(), "waiting for the model 3s") {
		t.Errorf("no progress line: %q", log.String())
	}
	now = t0.Add(4 * time.Second)
	r.chunk(loop.Chunk{Type: loop.ChunkTurnEnd, Turn: 1, Usage: &llm.Usage{}})
	r.chunk(loop.Chunk{Type: loop.ChunkToolCallStart, ToolCall: &loop.ToolCallInfo{Name: "run_command", Arguments: []byte(`{"command":"make"}`)}})
	if !strings.HasSuffix(log.String(), "waiting for the model 3s\r\x1b[K→ run_command {\"command\":\"make\"}\n") {
		t.Errorf("the progress line is not erased before the narration: %q", log.String())
	}
	r.prog.tick(now.Add(12 * time.Second))
	if !strings.HasSuffix(log.String(), "running run_command 12s") {
		t.Errorf("no progress of the command: %q", log.String())
	}
	r.close()
	if !strings.HasSuffix(log.String(), "\r\x1b[K") {
		t.Errorf("the line is left at the end: %q", log.String())
	}
}

// TestHoldKeepsTheScreenForAQuestion: while a question is on the screen,
// the progress line is erased and not drawn, and the run's chunks are kept
// and shown, in order, once the answer is read.
func TestHoldKeepsTheScreenForAQuestion(t *testing.T) {
	var out, log bytes.Buffer
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newTextRenderer(&out, &log, true)
	r.prog = &progress{w: &log}
	r.now = func() time.Time { return t0 }
	r.chunk(loop.Chunk{Type: loop.ChunkToolCallStart, ToolCall: &loop.ToolCallInfo{Name: "run_code", Arguments: []byte(`{"code":"x = 1"}`)}})
	r.prog.tick(t0.Add(2 * time.Second))
	if !strings.HasSuffix(log.String(), "running run_code 2s") {
		t.Fatalf("no progress line: %q", log.String())
	}
	release := r.hold()
	log.WriteString("Allow? ")
	r.prog.tick(t0.Add(3 * time.Second))
	r.chunk(loop.Chunk{Type: loop.ChunkToolCallResult, ToolCall: &loop.ToolCallInfo{Name: "read_file", Arguments: []byte(`{"path":"a.txt"}`)}, Content: "one line"})
	r.chunk(loop.Chunk{Type: loop.ChunkToolCallStart, ToolCall: &loop.ToolCallInfo{Name: "grep", Arguments: []byte(`{}`)}})
	if !strings.HasSuffix(log.String(), "running run_code 2s\r\x1b[KAllow? ") {
		t.Errorf("something was drawn over or after the question: %q", log.String())
	}
	log.WriteString("y\n")
	release()
	release() // a second release changes nothing
	if want := "Allow? y\n  ✓ read_file a.txt: one line\n→ grep {}\n"; !strings.HasSuffix(log.String(), want) {
		t.Errorf("the kept chunks are not shown after the answer: %q, want the end %q", log.String(), want)
	}
	r.prog.tick(t0.Add(5 * time.Second))
	if !strings.HasSuffix(log.String(), "running grep 5s") {
		t.Errorf("the progress line does not come back: %q", log.String())
	}
	// Held at the end of the run: close shows what was kept.
	release = r.hold()
	r.chunk(loop.Chunk{Type: loop.ChunkEnd, Result: &loop.Result{Status: loop.StatusCompleted}})
	r.close()
	release()
	if !strings.Contains(log.String(), "— completed in 0 turns") {
		t.Errorf("close does not show the kept end: %q", log.String())
	}
}

// TestParallelResultsInCallOrder: calls run at the same time finish in any
// order; their result lines on stderr keep the order of the calls.
func TestParallelResultsInCallOrder(t *testing.T) {
	call := func(id, path string) *loop.ToolCallInfo {
		return &loop.ToolCallInfo{ID: id, Name: "read_file", Arguments: []byte(`{"path":"` + path + `"}`)}
	}
	chunks := []loop.Chunk{
		{Type: loop.ChunkTurnStart, Turn: 1},
		{Type: loop.ChunkTurnEnd, Turn: 1, Usage: &llm.Usage{}, FinishReason: llm.FinishToolCalls},
		{Type: loop.ChunkToolCallStart, ToolCall: call("a", "first.txt")},
		{Type: loop.ChunkToolCallStart, ToolCall: call("b", "second.txt")},
		{Type: loop.ChunkToolCallStart, ToolCall: call("c", "third.txt")},
		{Type: loop.ChunkToolCallResult, ToolCall: call("c", "third.txt"), Content: "3"},
		{Type: loop.ChunkToolCallError, ToolCall: call("b", "second.txt"), Content: "second.txt does not exist"},
		{Type: loop.ChunkToolCallResult, ToolCall: call("a", "first.txt"), Content: "1"},
		{Type: loop.ChunkTurnStart, Turn: 2},
		{Type: loop.ChunkMessage, Turn: 2, Content: "Done."},
		{Type: loop.ChunkTurnEnd, Turn: 2, Usage: &llm.Usage{}, FinishReason: llm.FinishStop},
		{Type: loop.ChunkEnd, Result: &loop.Result{Status: loop.StatusCompleted, Answer: "Done."}},
	}
	_, log := render(false, chunks)
	a, b, c := strings.Index(log, "✓ read_file first.txt"), strings.Index(log, "✗ read_file second.txt"), strings.Index(log, "✓ read_file third.txt")
	if a < 0 || b < 0 || c < 0 || !(a < b && b < c) {
		t.Errorf("results not in call order (%d, %d, %d):\n%s", a, b, c, log)
	}
	// A result whose earlier call never reports is not lost.
	_, log = render(false, []loop.Chunk{
		{Type: loop.ChunkToolCallStart, ToolCall: call("a", "first.txt")},
		{Type: loop.ChunkToolCallStart, ToolCall: call("b", "second.txt")},
		{Type: loop.ChunkToolCallResult, ToolCall: call("b", "second.txt"), Content: "2"},
		{Type: loop.ChunkEnd, Result: &loop.Result{Status: loop.StatusCompleted}},
	})
	if !strings.Contains(log, "✓ read_file second.txt: 2") {
		t.Errorf("a kept result was lost:\n%s", log)
	}
}
