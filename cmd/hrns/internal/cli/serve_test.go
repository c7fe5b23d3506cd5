package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

func TestServeOptions(t *testing.T) {
	agents := t.TempDir()
	os.WriteFile(filepath.Join(agents, "coder.md"), []byte("---\ndescription: Edits code.\ntools: [read_file, web]\n---\nYou edit code.\n"), 0o644)
	cfgAgent := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfgAgent, []byte("api_keys = [\"sk-1\"]\n[agents.reviewer]\ninstructions = \"Review.\"\ntools = [\"read_file\"]\n"), 0o600)
	cfgOpen := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfgOpen, []byte("api_keys = [\"sk-1\"]\n"), 0o644)
	cfgPrice := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfgPrice, []byte("[prices.\"m\"]\ninput = -1.0\n"), 0o600)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"config agent with file tools needs a workdir", []string{"--addr", "0.0.0.0:0", "--model", "m", "--config", cfgAgent}, map[string]string{"OPENAI_API_KEY": "k"}, "agent reviewer (config (" + cfgAgent + ")): it uses read_file: start hrns serve with --workdir"},
		{"config keys readable by others", []string{"--config", cfgOpen}, nil, "chmod 600"},
		{"negative price", []string{"--config", cfgPrice}, nil, `prices: price of "m": input = -1`},
		{"bad addr", []string{"--addr", "nowhere"}, nil, "--addr"},
		{"postgres lease TTL", []string{"--db", "postgres://x", "--addr", "127.0.0.1:0", "--model", "m"}, map[string]string{"OPENAI_API_KEY": "k", "HRNS_LEASE_TTL": "soon"}, "HRNS_LEASE_TTL"},
		{"bad db", []string{"--db", "mysql:x"}, nil, "want sqlite:PATH"},
		{"bad sqlite sync", []string{"--sqlite-sync", "off"}, nil, `--sqlite-sync "off": want full or normal`},
		{"sqlite sync on postgres", []string{"--db", "postgres://x", "--sqlite-sync", "normal"}, nil, "--sqlite-sync applies to a SQLite store"},
		{"no keys off loopback", []string{"--addr", "0.0.0.0:0"}, nil, "no API keys"},
		{"no model", []string{"--addr", "127.0.0.1:0"}, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, "no model configured"},
		{"file tools need a workdir", []string{"--addr", "127.0.0.1:0", "--model", "m", "--agents", agents}, map[string]string{"OPENAI_API_KEY": "k"}, "--workdir"},
		{"arguments", []string{"extra"}, nil, "no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			env := map[string]string{"HOME": t.TempDir()}
			for k, v := range tt.env {
				env[k] = v
			}
			code := Run(t.Context(), append([]string{"serve"}, tt.args...), &IO{Out: &bytes.Buffer{}, Err: &stderr, Getenv: func(k string) string { return env[k] }})
			if code != ExitUsage || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), ExitUsage, tt.want)
			}
		})
	}
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeCrashRestart runs hrns serve as a real process, kills it with
// SIGKILL while sessions run, starts it again on the same database, and
// checks that every session completes with its log intact: no event lost
// or duplicated, and the cursors clients held before the crash still
// valid after it. It does so with each --sqlite-sync: a commit written
// with normal is not on disk when it returns, but is in the system, which
// a process's crash does not lose.
func TestServeCrashRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the hrns binary")
	}
	for _, mode := range []string{"full", "normal"} {
		t.Run("sqlite-sync="+mode, func(t *testing.T) { serveCrashRestart(t, "--sqlite-sync", mode) })
	}
}

func serveCrashRestart(t *testing.T, args ...string) {
	dir := t.TempDir()
	hrnsBinary(t) // built before the clock of the test starts

	// The model: each request takes a while, so that the kill finds
	// model calls in flight. It asks for the order's status, then
	// answers with what the tool said.
	orderRE := regexp.MustCompile(`Check order (\d+)`)
	resultRE := regexp.MustCompile(`status-\d+`)
	step := func(body []byte) openaitest.Reply {
		time.Sleep(150 * time.Millisecond)
		order := orderRE.FindSubmatch(body)
		if order == nil {
			return openaitest.Reply{Text: "no order"}
		}
		if res := resultRE.Find(body); res != nil && bytes.Contains(body, []byte(`"role":"tool"`)) {
			return openaitest.Reply{Text: fmt.Sprintf("order %s: %s", order[1], res)}
		}
		return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_"+string(order[1]), "get_order_status", fmt.Sprintf(`{"order_id":%q}`, order[1]))}}
	}
	model := openaitest.NewServer()
	defer model.Close()
	for range 500 {
		model.Push(openaitest.Reply{Func: step})
	}

	addr := freeAddr(t)
	home := t.TempDir()
	db := filepath.Join(dir, "sessions.db")
	var logs syncBuffer
	start := func() *exec.Cmd {
		t.Helper()
		return startServeProcess(t, addr, append([]string{"--db", "sqlite:" + db, "--model", "test-model"}, args...),
			[]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home, "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=test", "HRNS_API_KEYS=sk-crash"}, &logs, logs.String)
	}
	first := start()
	defer func() {
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	}()

	const n = 6
	c := client.New("http://"+addr, "sk-crash", &client.Options{RetryDelay: 50 * time.Millisecond, MaxAttempts: 30, PollWait: 5 * time.Second})
	tool := loop.NewTool("get_order_status", "Look up the status of an order.", func(_ context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		return "status-" + in.OrderID, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	outcomes := make([]followedRun, n) // each read across the crash
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			outcomes[i] = runFollowed(ctx, c, &client.SessionRequest{
				Agent:    client.AgentRef{Inline: &client.Agent{Name: "support-agent"}},
				Messages: client.Text(fmt.Sprintf("Check order %d.", 4240+i)),
			}, tool)
		})
	}
	// Kill the server once the runs are under way.
	for len(model.Requests()) < n+2 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	killedAt := len(model.Requests())
	second := start()
	wg.Wait()

	want := []string{
		"AgentEvent/message_event", "AgentStartedEvent", "ActiveStateChangeEvent/running",
		"AgentEvent/policy_event", "MetricsUpdateEvent", "ActiveStateChangeEvent/awaiting_tool_results",
		"AgentEvent/tool_result", "ActiveStateChangeEvent/running",
		"AgentEvent/policy_event", "MetricsUpdateEvent", "AgentEvent/answer_event", "AgentCompletionEvent",
	}
	for i, o := range outcomes {
		if o.err != nil {
			t.Errorf("session %d: %v", i, o.err)
			continue
		}
		wantAnswer := fmt.Sprintf("order %d: status-%d", 4240+i, 4240+i)
		if o.res.Status != session.StatusCompleted || o.res.Answer != wantAnswer {
			t.Errorf("session %d ended %s with %q, want completed with %q", i, o.res.Status, o.res.Answer, wantAnswer)
		}
		var history []session.Event
		for e, err := range c.Session(o.res.SessionID).Stream(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			history = append(history, e)
		}
		if diff := cmp.Diff(o.followed, history); diff != "" {
			t.Errorf("session %d: events read across the crash differ from the log (-followed +log):\n%s", i, diff)
		}
		var got []string
		for j, e := range history {
			if e.Index != int64(j) {
				t.Errorf("session %d: event %d has index %d", i, j, e.Index)
			}
			k := e.Type
			var d struct{ Kind, State string }
			json.Unmarshal(e.Data, &d)
			for _, s := range []string{d.Kind, d.State} {
				if s != "" {
					k += "/" + s
				}
			}
			got = append(got, k)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("session %d events (-want +got):\n%s", i, diff)
		}
	}
	t.Logf("killed after %d model requests; %d in all", killedAt, len(model.Requests()))

	// SIGTERM stops the server cleanly.
	second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Errorf("hrns serve after SIGTERM: %v", err)
	}
}
