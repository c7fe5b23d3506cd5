package main

// End-to-end tests: build the hrns binary, run it against a scripted
// OpenAI-compatible server on loopback, and check what a user sees:
// stdout, --json lines, files on disk and exit codes.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/gemini/geminitest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

var hrnsBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hrns-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hrnsBin = filepath.Join(dir, "hrns")
	build := exec.Command("go", "build", "-o", hrnsBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building hrns:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// hrns runs the binary in dir with the model at srv (nil for none).
func hrns(t *testing.T, dir string, srv *openaitest.Server, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), hrnsBin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	if srv != nil {
		cmd.Env = append(cmd.Env, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Stdin = strings.NewReader("") // not a terminal
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{stdout.String(), stderr.String(), code}
}

func workdir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the file\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\nship it\n"), 0o644)
	return dir
}

// toolResults returns the tool messages of a Chat Completions request body.
func toolResults(t *testing.T, body []byte) []string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

func call(id, name, args string) llm.ToolCall { return openaitest.ToolCall(id, name, args) }

func TestListThenRead(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "list_files", `{"path":"."}`)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c2", "read_file", `{"path":"hello.txt"}`)}},
		openaitest.Reply{Text: "The file says hello."},
	)
	defer srv.Close()
	r := hrns(t, workdir(t), srv, "run", "What does hello.txt say?")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if r.stdout != "The file says hello.\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "→ list_files") || !strings.Contains(r.stderr, "→ read_file") {
		t.Errorf("stderr does not narrate the calls:\n%s", r.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	listing := toolResults(t, reqs[1].Body)[0]
	if !strings.Contains(listing, "hello.txt") || !strings.Contains(listing, "notes.md") {
		t.Errorf("list_files result: %q", listing)
	}
	if read := toolResults(t, reqs[2].Body)[1]; !strings.Contains(read, "hello from the file") {
		t.Errorf("read_file result: %q", read)
	}
}

func TestTwoCallsInOneMessage(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{
			call("a", "read_file", `{"path":"hello.txt"}`),
			call("b", "read_file", `{"path":"notes.md"}`),
		}},
		openaitest.Reply{Text: "Both read."},
	)
	defer srv.Close()
	r := hrns(t, workdir(t), srv, "run", "read both")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	results := toolResults(t, srv.Requests()[1].Body)
	if len(results) != 2 || !strings.Contains(results[0], "hello from the file") || !strings.Contains(results[1], "ship it") {
		t.Errorf("results in call order: %q", results)
	}
}

func TestBadArgumentsAndUnknownToolAreRecovered(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "read_file", `{"path": "hello.txt"`)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c2", "delete_everything", `{}`)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c3", "read_file", `{"path":"hello.txt"}`)}},
		openaitest.Reply{Text: "Recovered."},
	)
	defer srv.Close()
	r := hrns(t, workdir(t), srv, "run", "read it")
	if r.code != 0 || r.stdout != "Recovered.\n" {
		t.Fatalf("exit %d stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	reqs := srv.Requests()
	if got := toolResults(t, reqs[1].Body)[0]; !strings.Contains(got, "not valid JSON") {
		t.Errorf("bad JSON result: %q", got)
	}
	if got := toolResults(t, reqs[2].Body)[1]; !strings.Contains(got, `unknown tool "delete_everything"`) {
		t.Errorf("unknown tool result: %q", got)
	}
	if got := toolResults(t, reqs[3].Body)[2]; !strings.Contains(got, "hello from the file") {
		t.Errorf("recovered read: %q", got)
	}
}

func TestRateLimitThenSuccess(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"0.05"}},
			Body: openaitest.ErrorBody("rate_limit_error", "rate_limit_exceeded", "slow down")},
		openaitest.Reply{Text: "After the wait."},
	)
	defer srv.Close()
	r := hrns(t, workdir(t), srv, "run", "hi")
	if r.code != 0 || r.stdout != "After the wait.\n" {
		t.Fatalf("exit %d stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "retrying in 50ms") {
		t.Errorf("the retry is not reported:\n%s", r.stderr)
	}
}

func TestCommandNeedsApproval(t *testing.T) {
	script := func() *openaitest.Server {
		return openaitest.NewServer(
			openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":"echo made > out.txt"}`)}},
			openaitest.Reply{Text: "Done."},
		)
	}
	t.Run("refused without --yes and no terminal", func(t *testing.T) {
		srv := script()
		defer srv.Close()
		dir := workdir(t)
		r := hrns(t, dir, srv, "run", "make out.txt")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "out.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the command ran without approval")
		}
		if got := toolResults(t, srv.Requests()[1].Body)[0]; !strings.Contains(got, "--yes") {
			t.Errorf("the model is not told how to allow it: %q", got)
		}
		if !strings.Contains(r.stderr, "rerun with --yes") {
			t.Errorf("the user is not told how to allow it:\n%s", r.stderr)
		}
	})
	t.Run("run with --yes", func(t *testing.T) {
		srv := script()
		defer srv.Close()
		dir := workdir(t)
		r := hrns(t, dir, srv, "run", "--yes", "make out.txt")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
		if err != nil || string(b) != "made\n" {
			t.Fatalf("out.txt = %q, %v", b, err)
		}
	})
}

func TestJSONLines(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "read_file", `{"path":"hello.txt"}`)}},
		openaitest.Reply{Text: "It says hello."},
	)
	defer srv.Close()
	r := hrns(t, workdir(t), srv, "run", "--json", "read hello.txt")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var kinds []string
	var last map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		kind := line["type"].(string)
		if n := len(kinds); n == 0 || kinds[n-1] != kind {
			kinds = append(kinds, kind)
		}
		last = line
	}
	want := []string{"turn_start", "tool_call_delta", "turn_end", "tool_call_start", "tool_call_result", "turn_start", "message", "turn_end", "end"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	res := last["result"].(map[string]any)
	if res["status"] != "completed" || res["answer"] != "It says hello." {
		t.Errorf("end line: %v", res)
	}
}

func TestExitCodes(t *testing.T) {
	t.Run("no prompt", func(t *testing.T) {
		if r := hrns(t, t.TempDir(), nil, "run"); r.code != 2 || !strings.Contains(r.stderr, "needs a prompt") {
			t.Errorf("exit %d: %s", r.code, r.stderr)
		}
	})
	t.Run("unknown command", func(t *testing.T) {
		if r := hrns(t, t.TempDir(), nil, "frobnicate"); r.code != 2 {
			t.Errorf("exit %d", r.code)
		}
	})
	t.Run("no model configured", func(t *testing.T) {
		r := hrns(t, t.TempDir(), nil, "run", "hi")
		if r.code != 2 || !strings.Contains(r.stderr, "--model") || !strings.Contains(r.stderr, "hrns demo") {
			t.Errorf("exit %d: %s", r.code, r.stderr)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		srv := openaitest.NewServer()
		defer srv.Close()
		if r := hrns(t, t.TempDir(), srv, "run", "--tools", "read_file,teleport", "hi"); r.code != 2 || !strings.Contains(r.stderr, `unknown tool "teleport"`) {
			t.Errorf("exit %d: %s", r.code, r.stderr)
		}
	})
	t.Run("key refused", func(t *testing.T) {
		srv := openaitest.NewServer(openaitest.Reply{Status: 401, Body: openaitest.ErrorBody("invalid_request_error", "invalid_api_key", "Incorrect API key provided")})
		defer srv.Close()
		r := hrns(t, t.TempDir(), srv, "run", "hi")
		if r.code != 1 || !strings.Contains(r.stderr, "OPENAI_API_KEY") {
			t.Errorf("exit %d: %s", r.code, r.stderr)
		}
	})
}

func TestRecordThenReplay(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "read_file", `{"path":"hello.txt"}`)}},
		openaitest.Reply{Text: "Recorded answer."},
	)
	dir := workdir(t)
	rec := filepath.Join(t.TempDir(), "session.jsonl")
	r := hrns(t, dir, srv, "run", "--record", rec, "read hello.txt")
	srv.Close()
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	// No model now: the tools run again, the answers come from the file.
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("changed since\n"), 0o644)
	r = hrns(t, dir, nil, "run", "--replay", rec, "--json", "read hello.txt")
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "changed since") || !strings.Contains(r.stdout, `"answer":"Recorded answer."`) {
		t.Errorf("replay did not run the tool for real or lost the answer:\n%s", r.stdout)
	}
}

func TestSkills(t *testing.T) {
	dir := workdir(t)
	skill := filepath.Join(dir, ".agents", "skills", "release-notes")
	os.MkdirAll(skill, 0o755)
	os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte("---\nname: release-notes\ndescription: Writes release notes from the changelog.\n---\nGroup the changes by kind.\n"), 0o644)
	bad := filepath.Join(dir, ".agents", "skills", "broken")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "SKILL.md"), []byte("---\nname: [unclosed\n---\n"), 0o644)

	r := hrns(t, dir, nil, "skills")
	if r.code != 0 || !strings.Contains(r.stdout, "release-notes") || !strings.Contains(r.stderr, "broken") {
		t.Fatalf("hrns skills: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "load_skill", `{"name":"release-notes"}`)}},
		openaitest.Reply{Text: "Grouped."},
	)
	defer srv.Close()
	r = hrns(t, dir, srv, "run", "write the release notes")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "broken") {
		t.Errorf("the malformed skill is not reported:\n%s", r.stderr)
	}
	reqs := srv.Requests()
	if !strings.Contains(string(reqs[0].Body), "Writes release notes from the changelog.") {
		t.Errorf("the system prompt does not introduce the skill")
	}
	if got := toolResults(t, reqs[1].Body)[0]; !strings.Contains(got, "Group the changes by kind.") {
		t.Errorf("load_skill result: %q", got)
	}
}

func TestAnthropicProvider(t *testing.T) {
	srv := anthropictest.NewServer(
		anthropictest.Reply{Thinking: "Read it first.", ToolCalls: []llm.ToolCall{anthropictest.ToolCall("toolu_1", "read_file", `{"path":"hello.txt"}`)}},
		anthropictest.Reply{Text: "It greets you."},
	)
	defer srv.Close()
	cmd := exec.CommandContext(t.Context(), hrnsBin, "run", "--provider", "anthropic", "--model", "claude-test", "what does hello.txt say?")
	cmd.Dir = workdir(t)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ANTHROPIC_API_KEY=sk-ant-test", "ANTHROPIC_BASE_URL=" + srv.URL()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if stdout.String() != "It greets you.\n" || !strings.Contains(stderr.String(), "thinking: Read it first.") {
		t.Errorf("stdout %q\nstderr %s", stdout.String(), stderr.String())
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Header.Get("X-Api-Key") != "sk-ant-test" {
		t.Fatalf("%d requests", len(reqs))
	}
	if body := string(reqs[1].Body); !strings.Contains(body, `"tool_result"`) || !strings.Contains(body, "hello from the file") {
		t.Errorf("the tool result did not reach Anthropic: %s", body)
	}
}

// The real binary against the Gemini wire format: --provider gemini with
// --base-url, the key from GOOGLE_API_KEY (GEMINI_API_KEY unset). The model
// thinks, calls read_file without a call id and with a thought signature;
// the second request must carry the signature back on the call and the
// file in the function response.
func TestGeminiProvider(t *testing.T) {
	srv := geminitest.NewServer(
		geminitest.Reply{Thoughts: "Read it first.", Signature: "c2lnLWUyZQ==", ToolCalls: []llm.ToolCall{geminitest.ToolCall("", "read_file", `{"path":"hello.txt"}`)}},
		geminitest.Reply{Text: "It greets you."},
	)
	defer srv.Close()
	cmd := exec.CommandContext(t.Context(), hrnsBin, "run", "--provider", "gemini", "--base-url", srv.URL(), "--model", "gemini-test", "what does hello.txt say?")
	cmd.Dir = workdir(t)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GOOGLE_API_KEY=g-test"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if stdout.String() != "It greets you.\n" || !strings.Contains(stderr.String(), "thinking: Read it first.") {
		t.Errorf("stdout %q\nstderr %s", stdout.String(), stderr.String())
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Header.Get("X-Goog-Api-Key") != "g-test" || reqs[0].Model != "gemini-test" {
		t.Fatalf("%d requests", len(reqs))
	}
	body := string(reqs[1].Body)
	if !strings.Contains(body, `"functionCall":{"name":"read_file","args":{"path":"hello.txt"}},"thoughtSignature":"c2lnLWUyZQ=="`) ||
		!strings.Contains(body, `"functionResponse":{"name":"read_file","response":{"output":`) || !strings.Contains(body, "hello from the file") {
		t.Errorf("the call or its result did not go back to Gemini: %s", body)
	}

	// Without a key, the error names the variables.
	cmd = exec.CommandContext(t.Context(), hrnsBin, "run", "--provider", "gemini", "--model", "gemini-test", "hi")
	cmd.Dir = workdir(t)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	stderr.Reset()
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "GEMINI_API_KEY") || !strings.Contains(stderr.String(), "GOOGLE_API_KEY") {
		t.Errorf("no key: %v\n%s", err, stderr.String())
	}
}

func TestInterruptStopsCleanly(t *testing.T) {
	// A model that never answers: the run waits until hrns is interrupted.
	reached := make(chan struct{}, 1)
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so the server notices when the client goes
		reached <- struct{}{}
		<-r.Context().Done() // hrns closed the stream
		close(gone)
	}))
	defer srv.Close()
	cmd := exec.CommandContext(t.Context(), hrnsBin, "run", "--model", "m", "--base-url", srv.URL, "hi")
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-reached:
	case err := <-exited:
		t.Fatalf("hrns exited before reaching the model: %v\n%s", err, stderr.String())
	}
	cmd.Process.Signal(os.Interrupt)
	err := <-exited
	<-gone
	ee, ok := errors.AsType[*exec.ExitError](err)
	if !ok || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("err %v, stderr %q", err, stderr.String())
	}
}

func TestMCPServerTools(t *testing.T) {
	script, _ := filepath.Abs(filepath.Join("..", "..", "mcp", "testdata", "servers", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if _, err := os.Stat(script); err != nil {
		t.Skipf("the MCP test servers are not installed (%s is missing): run .ci/setup-npm", script)
	}
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "everything__echo", `{"message":"over MCP"}`)}},
		openaitest.Reply{Text: "Echoed."},
	)
	defer srv.Close()
	r := hrns(t, workdir(t), srv, "run", "--tools", "none", "--mcp", "everything=node "+script, "echo something")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(string(srv.Requests()[0].Body), `"everything__echo"`) {
		t.Errorf("the MCP server's tools were not offered")
	}
	if got := toolResults(t, srv.Requests()[1].Body)[0]; !strings.Contains(got, "over MCP") {
		t.Errorf("echo result: %q", got)
	}
}

// A stream cut after part of the answer is retried; stdout, redirected,
// holds the answer exactly once.
func TestRetryAfterPartialAnswer(t *testing.T) {
	partial := "data: " + `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"The full answer is forty"},"finish_reason":null}]}` + "\n\n"
	srv := openaitest.NewServer(
		openaitest.Reply{Raw: partial}, // no finish, no [DONE]: a retryable failure
		openaitest.Reply{Text: "The full answer is forty-two."},
	)
	defer srv.Close()
	r := hrns(t, workdir(t), srv, "run", "what is it?")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if r.stdout != "The full answer is forty-two.\n" {
		t.Errorf("stdout = %q, want the answer exactly once", r.stdout)
	}
	if !strings.Contains(r.stderr, "retrying in") {
		t.Errorf("the retry is not told:\n%s", r.stderr)
	}
}

// Standard input that is /dev/null (CI, cron, systemd, docker run without
// -i) is not a terminal: no prompt, and the model is told about --yes.
func TestApprovalWithStdinDevNull(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":"echo made > out.txt"}`)}},
		openaitest.Reply{Text: "Done."},
	)
	defer srv.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	dir := workdir(t)
	cmd := exec.CommandContext(t.Context(), hrnsBin, "run", "make out.txt")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model"}
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = devNull, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Allow?") || !strings.Contains(stderr.String(), "rerun with --yes") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	if got := toolResults(t, srv.Requests()[1].Body)[0]; !strings.Contains(got, "--yes") {
		t.Errorf("the model is not told how to allow it: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran without approval")
	}
}
