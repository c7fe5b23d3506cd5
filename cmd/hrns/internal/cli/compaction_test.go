package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// windowModel is a scripted model with a context window, speaking the
// OpenAI Chat Completions wire format (openaitest.Encode). It counts each
// request's tokens as about four bytes of its messages and tools a token
// (times Scale), refuses a request above Window with OpenAI's own
// context_length_exceeded error (openai/testdata/context_length.http),
// reports its count as the usage's prompt_tokens, and refuses, as
// OpenAI does, a transcript whose tool messages do not answer the calls
// of the assistant message before them.
//
// Its agent follows a chain of parts: each tool result ends with "next:
// part-NNN", the last with "THE END. The answer is: WORD"; it calls Tool
// (with Args for the part) for the next part, and answers with the word
// at the end. It checks the task (the first user message) in every
// request. A request without tools is a summary request: it answers with
// a short summary.
type windowModel struct {
	Window int
	Scale  float64
	Tool   string
	Args   func(part int) string
	Task   string

	srv      *httptest.Server
	errBody  string
	mu       sync.Mutex
	requests int
	maxSeen  int    // the largest request by its count, refused or not
	maxOK    int    // the largest request answered
	refused  int    // requests refused as too long
	summary  int    // summary requests
	invalid  string // the first invalid transcript, if any
	lostTask int    // requests without the task
	calls    int
}

var (
	nextPartRE = regexp.MustCompile(`next: part-(\d+)`)
	theEndRE   = regexp.MustCompile(`THE END\. The answer is: ([a-z0-9-]+)`)
)

func newWindowModel(t *testing.T, m *windowModel) *windowModel {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "openai", "testdata", "context_length.http"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	m.errBody = string(body)
	if m.Scale == 0 {
		m.Scale = 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.chat)
	m.srv = httptest.NewServer(mux)
	t.Cleanup(m.srv.Close)
	return m
}

func (m *windowModel) URL() string { return m.srv.URL + "/v1" }

type chatMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

func (c *chatMessage) text() string {
	var s string
	if json.Unmarshal(c.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(c.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// count is the model's token count of a request: about four bytes a
// token of its messages and tools as sent, times Scale.
func (m *windowModel) count(messages, tools json.RawMessage) int {
	return int(float64(len(messages)+len(tools)) / 4 * m.Scale)
}

// validate reports what OpenAI refuses in a transcript: a tool message
// that answers no call of the assistant message before it, and a call
// left without its result before the next message.
func validate(msgs []chatMessage) string {
	open := map[string]bool{}
	for i, msg := range msgs {
		switch msg.Role {
		case "tool":
			if !open[msg.ToolCallID] {
				return fmt.Sprintf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages.[%d])", i)
			}
			delete(open, msg.ToolCallID)
		default:
			if len(open) > 0 {
				return fmt.Sprintf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. (messages.[%d])", i)
			}
			if msg.Role == "assistant" {
				for _, c := range msg.ToolCalls {
					open[c.ID] = true
				}
			}
		}
	}
	return ""
}

func (m *windowModel) chat(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model    string          `json:"model"`
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	}
	var msgs []chatMessage
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req.Messages, &msgs) != nil {
		http.Error(w, openaitest.ErrorBody("invalid_request_error", "", "We could not parse the JSON body of your request."), http.StatusBadRequest)
		return
	}
	n := m.count(req.Messages, req.Tools)
	m.mu.Lock()
	m.requests++
	m.maxSeen = max(m.maxSeen, n)
	if n > m.Window {
		m.refused++
		m.mu.Unlock()
		msg := regexp.MustCompile(`maximum context length is \d+ tokens`).ReplaceAllString(m.errBody, fmt.Sprintf("maximum context length is %d tokens", m.Window))
		msg = regexp.MustCompile(`resulted in \d+ tokens`).ReplaceAllString(msg, fmt.Sprintf("resulted in %d tokens", n))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, msg)
		return
	}
	if bad := validate(msgs); bad != "" {
		if m.invalid == "" {
			m.invalid = bad
		}
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, openaitest.ErrorBody("invalid_request_error", "", bad))
		return
	}
	m.maxOK = max(m.maxOK, n)
	usage := &llm.Usage{InputTokens: int64(n), OutputTokens: 12}
	var reply openaitest.Reply
	switch {
	case len(req.Tools) == 0 || string(req.Tools) == "null":
		m.summary++
		last := "none"
		for _, match := range nextPartRE.FindAllStringSubmatch(string(req.Messages), -1) {
			last = match[1]
		}
		reply = openaitest.Reply{Text: "Summary: the agent is reading the chain of parts one by one; the last part read points to part " + last + ".", Usage: usage}
	default:
		task := false
		for _, msg := range msgs {
			if msg.Role == "user" {
				task = strings.Contains(msg.text(), m.Task)
				break
			}
		}
		if !task {
			m.lostTask++
		}
		var last string
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == "tool" {
				last = msgs[i].text()
				break
			}
		}
		m.calls++
		id := fmt.Sprintf("call_%04d", m.calls)
		switch end, next := theEndRE.FindStringSubmatch(last), nextPartRE.FindStringSubmatch(last); {
		case !task:
			reply = openaitest.Reply{Text: "I no longer know what my task was.", Usage: usage}
		case end != nil:
			reply = openaitest.Reply{Text: "The answer is: " + end[1], Usage: usage}
		case next != nil:
			part, _ := strconv.Atoi(next[1])
			reply = openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall(id, m.Tool, m.Args(part))}, Usage: usage}
		case last == "":
			reply = openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall(id, m.Tool, m.Args(1))}, Usage: usage}
		default:
			reply = openaitest.Reply{Text: "The last result made no sense to me.", Usage: usage}
		}
	}
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Write(openaitest.Encode(reply, req.Model))
}

// partText is part n of a chain of parts parts long: about 8 KiB of text
// that ends with where the chain goes on, or its answer.
func partText(n, parts int, answer string) string {
	words := []string{"ledger", "amber", "quartz", "harbor", "signal", "meadow", "copper", "lantern", "orbit", "thistle", "granite", "willow"}
	var b strings.Builder
	fmt.Fprintf(&b, "part %d of %d\n", n, parts)
	for line := 0; b.Len() < 8<<10-64; line++ {
		for k := range 11 {
			b.WriteString(words[(n*7+line*3+k*5)%len(words)])
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d.%d\n", n, line)
	}
	if n == parts {
		fmt.Fprintf(&b, "THE END. The answer is: %s\n", answer)
	} else {
		fmt.Fprintf(&b, "next: part-%03d\n", n+1)
	}
	return b.String()
}

// TestRunCompactsLongTask: hrns run does 300 turns of 8 KiB tool results
// with a model whose window is 32k tokens (by the model's own count): it
// finishes with the right answer, no request passes the window, and it
// says on stderr that it compacted.
func TestRunCompactsLongTask(t *testing.T) {
	if testing.Short() {
		t.Skip("300 turns")
	}
	const parts, answer = 300, "heliotrope-4711"
	dir := t.TempDir()
	for n := 1; n <= parts; n++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%03d.txt", n)), []byte(partText(n, parts, answer)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	task := "Follow the chain of parts from part-001.txt to its end and tell me its answer."
	model := newWindowModel(t, &windowModel{Window: 32768, Tool: "read_file", Task: task,
		Args: func(n int) string { return fmt.Sprintf(`{"path":"part-%03d.txt"}`, n) }})
	home := t.TempDir()
	cfg := filepath.Join(home, "config.toml")
	os.WriteFile(cfg, []byte("[context_windows]\n\"scripted-32k\" = 32768\n"), 0o600)
	var out, errOut bytes.Buffer
	env := map[string]string{"HOME": home, "XDG_CONFIG_HOME": home, "XDG_DATA_HOME": home}
	args := []string{"run", "--config", cfg, "--base-url", model.URL(), "--model", "scripted-32k", "--tools", "read_file", "--no-skills",
		"--max-turns", "400", "--workdir", dir, task}
	code := Run(t.Context(), args, &IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }})
	if code != ExitOK {
		t.Fatalf("exit %d\nstderr (end):\n%s", code, tail(errOut.String(), 3000))
	}
	if got := strings.TrimSpace(out.String()); got != "The answer is: "+answer {
		t.Errorf("answer %q, want %q", got, "The answer is: "+answer)
	}
	model.mu.Lock()
	defer model.mu.Unlock()
	t.Logf("%d requests (%d summaries), largest %d tokens of 32768, %d refused", model.requests, model.summary, model.maxSeen, model.refused)
	if model.maxSeen > model.Window || model.refused > 0 {
		t.Errorf("a request had %d tokens, past the window of %d (%d refused)", model.maxSeen, model.Window, model.refused)
	}
	if model.invalid != "" || model.lostTask > 0 {
		t.Errorf("the transcript was broken: %q; %d requests without the task", model.invalid, model.lostTask)
	}
	if model.calls < parts+1 {
		t.Errorf("%d model turns, want at least %d", model.calls, parts+1)
	}
	lines := strings.Count(errOut.String(), "(context compacted: ")
	if lines == 0 || !strings.Contains(errOut.String(), "of a 32.8k window") {
		t.Errorf("stderr says nothing of a compaction in a 32.8k window:\n%s", tail(errOut.String(), 3000))
	}
	t.Logf("%d compactions", lines)
}

// TestRunCompactsAfterContextLengthError: a model that refuses a request
// as too long before hrns's estimate of its window says so (the config
// gives it twice its real window, or none) gets the request again,
// compacted, and the run finishes; --json reports each compaction with
// its reason.
func TestRunCompactsAfterContextLengthError(t *testing.T) {
	const parts, answer = 40, "marigold-1234"
	for _, tc := range []struct {
		name   string
		config string
	}{
		{"window too large in the config", "[context_windows]\n\"scripted-32k\" = 65536\n"},
		{"window unknown", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n := 1; n <= parts; n++ {
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%03d.txt", n)), []byte(partText(n, parts, answer)), 0o644)
			}
			task := "Follow the chain of parts from part-001.txt to its end and tell me its answer."
			model := newWindowModel(t, &windowModel{Window: 32768, Tool: "read_file", Task: task,
				Args: func(n int) string { return fmt.Sprintf(`{"path":"part-%03d.txt"}`, n) }})
			home := t.TempDir()
			cfg := filepath.Join(home, "config.toml")
			os.WriteFile(cfg, []byte(tc.config), 0o600)
			var out, errOut bytes.Buffer
			env := map[string]string{"HOME": home, "XDG_CONFIG_HOME": home, "XDG_DATA_HOME": home}
			args := []string{"run", "--json", "--config", cfg, "--base-url", model.URL(), "--model", "scripted-32k", "--tools", "read_file", "--no-skills",
				"--max-turns", "100", "--workdir", dir, task}
			code := Run(t.Context(), args, &IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }})
			if code != ExitOK {
				t.Fatalf("exit %d\nstderr:\n%s\nstdout (end):\n%s", code, errOut.String(), tail(out.String(), 2000))
			}
			var compactions []loop.CompactionInfo
			var end *loop.Result
			sc := bufio.NewScanner(&out)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var c loop.Chunk
				if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				switch c.Type {
				case loop.ChunkCompaction:
					compactions = append(compactions, *c.Compaction)
				case loop.ChunkEnd:
					end = c.Result
				}
			}
			if end == nil || end.Answer != "The answer is: "+answer {
				t.Fatalf("end %+v, want the answer %q", end, answer)
			}
			model.mu.Lock()
			defer model.mu.Unlock()
			t.Logf("%d requests, %d refused, %d compactions, largest answered %d", model.requests, model.refused, len(compactions), model.maxOK)
			if model.refused == 0 {
				t.Fatal("the model refused no request: the test tests nothing")
			}
			fromError := 0
			for _, c := range compactions {
				if c.Reason == "context_length" {
					fromError++
					if c.TokensAfter >= c.TokensBefore || c.MessagesAfter > c.MessagesBefore {
						t.Errorf("a compaction did not shrink the transcript: %+v", c)
					}
				}
			}
			// Each refusal is followed by a compaction and the request
			// sent again (never twice in a row: the retry fits).
			if fromError != model.refused {
				t.Errorf("%d refusals, %d compactions after one", model.refused, fromError)
			}
			if model.invalid != "" || model.lostTask > 0 {
				t.Errorf("the transcript was broken: %q; %d requests without the task", model.invalid, model.lostTask)
			}
		})
	}
}

// TestServeCompactsLongSession: a session of hrns serve, over HTTP, does
// 300 steps whose client-side tool returns 8 KiB each with a model whose
// window is 32k tokens: it completes with the right answer, no request
// passes the window, and its events say where it compacted. And a model
// that refuses a request as too long before hrns's estimate of its window
// says so (the config gives it twice its real window) gets the request
// again, compacted, and the session completes.
func TestServeCompactsLongSession(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parts  int
		window int // in the config
		refuse bool
	}{
		{"300 steps within the window", 300, 32768, false},
		{"refused before the estimate", 40, 65536, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.parts > 100 {
				t.Skip("300 steps")
			}
			parts, answer := tc.parts, "saffron-2718"
			task := "Follow the chain of parts from part 1 to its end with read_part and tell me its answer."
			model := newWindowModel(t, &windowModel{Window: 32768, Tool: "read_part", Task: task,
				Args: func(n int) string { return fmt.Sprintf(`{"part":%d}`, n) }})
			home := t.TempDir()
			cfg := filepath.Join(home, "config.toml")
			os.WriteFile(cfg, []byte(fmt.Sprintf("[context_windows]\n\"scripted-32k\" = %d\n", tc.window)), 0o600)
			s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-long"},
				"--model", "scripted-32k", "--config", cfg, "--max-steps", "400", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"))
			c := client.New(s.url, "sk-long", &client.Options{PollWait: 5 * time.Second})
			tool := loop.NewTool("read_part", "Reads a part of the chain.", func(_ context.Context, in struct {
				Part int `json:"part"`
			}) (string, error) {
				if in.Part < 1 || in.Part > parts {
					return "", fmt.Errorf("no part %d", in.Part)
				}
				return partText(in.Part, parts, answer), nil
			})
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			res, err := c.RunSession(ctx, &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "reader"}}, Messages: client.Text(task)}, tool)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != session.StatusCompleted || res.Answer != "The answer is: "+answer {
				t.Fatalf("session ended %s with %q, want completed with the answer %q", res.Status, res.Answer, answer)
			}
			var compacted []session.ContextCompacted
			for e, err := range c.Session(res.SessionID).Stream(ctx) {
				if err != nil {
					t.Fatal(err)
				}
				if e.Type == session.EventContextCompacted {
					var d session.ContextCompacted
					if err := json.Unmarshal(e.Data, &d); err != nil {
						t.Fatal(err)
					}
					compacted = append(compacted, d)
				}
			}
			model.mu.Lock()
			defer model.mu.Unlock()
			t.Logf("%d requests (%d summaries), largest %d tokens of 32768 (%d answered), %d refused; %d compactions",
				model.requests, model.summary, model.maxSeen, model.maxOK, model.refused, len(compacted))
			if model.invalid != "" || model.lostTask > 0 {
				t.Errorf("the transcript was broken: %q; %d requests without the task", model.invalid, model.lostTask)
			}
			if len(compacted) == 0 {
				t.Fatal("no ContextCompactedEvent")
			}
			fromError := 0
			for _, d := range compacted {
				if d.Window != tc.window || d.TokensAfter >= d.TokensBefore {
					t.Errorf("ContextCompactedEvent %+v", d)
				}
				if d.Reason == "context_length" {
					fromError++
				}
			}
			if !tc.refuse {
				if model.maxSeen > model.Window || model.refused > 0 {
					t.Errorf("a request had %d tokens, past the window of %d (%d refused)", model.maxSeen, model.Window, model.refused)
				}
				return
			}
			if model.refused == 0 || fromError != model.refused {
				t.Errorf("%d requests refused, %d compactions after a refusal: want each refusal compacted and sent again", model.refused, fromError)
			}
		})
	}
}

// tail returns the end of s, for messages.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// TestCompactionConfig: [context_windows] and [compaction] are read,
// validated (a bad value is a clear error), and give each model's
// compaction: the window from the config over the built-in table, none
// when turned off.
func TestCompactionConfig(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		model      string
		err        string // a substring; "" for valid
		want       *loop.Compaction
	}{
		{"defaults, known model", "", "gpt-4.1-2025-04-14", "", &loop.Compaction{ContextWindow: 1047576}},
		{"defaults, unknown model", "", "qwen3:8b", "", &loop.Compaction{}},
		{"window from the config", "[context_windows]\n\"qwen3:8b\" = 40960\n", "qwen3:8b", "", &loop.Compaction{ContextWindow: 40960}},
		{"config over the table", "[context_windows]\n\"gpt-4o\" = 64000\n", "gpt-4o", "", &loop.Compaction{ContextWindow: 64000}},
		{"tuned", "[compaction]\nthreshold = 0.7\ntarget = 0.4\nkeep_turns = 4\n", "gpt-4o", "", &loop.Compaction{ContextWindow: 128000, Threshold: 0.7, Target: 0.4, KeepTurns: 4}},
		{"off", "[compaction]\nenabled = false\n", "gpt-4o", "", nil},
		{"window too small", "[context_windows]\n\"m\" = 100\n", "m", "context_windows: context window of \"m\": 100", nil},
		{"threshold not a fraction", "[compaction]\nthreshold = 80\n", "m", "compaction: threshold = 80", nil},
		{"target above threshold", "[compaction]\nthreshold = 0.5\ntarget = 0.6\n", "m", "compaction: target = 0.6: want less than the threshold", nil},
		{"unknown key", "[compaction]\nthreshhold = 0.5\n", "m", "unknown key", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig("config.toml", []byte(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.compaction(tc.model)
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("compaction(%q) = %+v, want %+v", tc.model, got, tc.want)
			}
		})
	}
}
