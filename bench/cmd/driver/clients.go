package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hrns-dev/hrns/bench/internal/task"
)

// A client is one row of the table: a program doing the task.
type client struct {
	name string // row name and -clients key
	desc string // what it runs
	// dep names the library measured, for its version: a Go module
	// path (read from the go.mod of dir) or an npm package (read from
	// node/package.json); empty for hrns itself.
	dep string
	// dir holds the client's module, relative to the bench folder.
	dir string
	// perProcess is set for hrns run: each run is a process of its own.
	perProcess bool
	// baseline marks the raw baseline, hrns marks hrns's clients, and
	// experiment a variant measuring a proposed change, which no target
	// verdict uses.
	baseline, hrns, experiment bool

	// build builds the client into e.bin; nil for scripts.
	build func(ctx context.Context, e *env) error
	// argv returns the command of one process doing runs runs.
	argv func(e *env, runs int) []string
	// precheck reports why the client cannot run here, if it cannot.
	precheck func(e *env) error
}

// clients returns every client, the baseline first.
func clients() []*client {
	goPeer := func(name, pkg, desc, dep string) *client {
		dir := filepath.Join("peers", pkg)
		return &client{name: name, desc: desc, dep: dep, dir: dir,
			build: func(ctx context.Context, e *env) error {
				return e.goBuild(ctx, filepath.Join(e.benchDir, dir), "-o", filepath.Join(e.bin, name), ".")
			},
			argv: binArgv(name),
		}
	}
	nodePeer := func(name, script, desc, dep string) *client {
		return &client{name: name, desc: desc, dep: dep, dir: "node",
			argv: func(e *env, runs int) []string {
				return []string{"node", filepath.Join(e.benchDir, "node", script), "--runs", strconv.Itoa(runs)}
			},
			precheck: func(e *env) error {
				if _, err := exec.LookPath("node"); err != nil {
					return fmt.Errorf("%w: node is not on PATH", errNotInstalled)
				}
				if _, err := os.Stat(filepath.Join(e.benchDir, "node", "node_modules", dep)); err != nil {
					return fmt.Errorf("%w: bench/node/node_modules/%s is missing: run bench/setup.sh (npm ci)", errNotInstalled, dep)
				}
				return nil
			},
		}
	}
	return []*client{
		{name: "raw", desc: "baseline: net/http, bufio lines, encoding/json per chunk (bench/internal/raw)", baseline: true,
			argv: binArgv("raw")},
		{name: "hrns-loop", desc: "hrns loop library: openai.Client, one loop.NewTool tool, Agent.Run", hrns: true,
			argv: binArgv("hrnsloop")},
		{name: "hrns-run", desc: "`hrns run --json --tools read_file`, one process per run, the tool reading real files", hrns: true,
			perProcess: true,
			build: func(ctx context.Context, e *env) error {
				return e.goBuild(ctx, e.rootDir, "-o", filepath.Join(e.bin, "hrns"), "./cmd/hrns")
			},
			argv: func(e *env, _ int) []string {
				return []string{filepath.Join(e.bin, "hrns"), "run", "--json", "--tools", task.ToolName, "--no-skills",
					"--workdir", e.work, "--system", task.System, task.Prompt}
			}},
		goPeer("openai-go", "openaigo", "openai-go v3, Chat Completions streaming, ChatCompletionAccumulator, hand-written loop", "github.com/openai/openai-go/v3"),
		goPeer("fantasy", "fantasy", "charm.land/fantasy: OpenAI provider, NewAgentTool, Agent.Stream", "charm.land/fantasy"),
		goPeer("eino", "eino", "cloudwego/eino react agent, eino-ext OpenAI model, InferTool, Agent.Stream", "github.com/cloudwego/eino"),
		goPeer("langchaingo", "langchaingo", "tmc/langchaingo OpenAI functions agent, Executor, streaming", "github.com/tmc/langchaingo"),
		nodePeer("openai-agents", "agents.mjs", "@openai/agents (Chat Completions), run(…, {stream: true}), zod tool", "@openai/agents"),
		nodePeer("ai-sdk", "aisdk.mjs", "Vercel AI SDK: streamText, @ai-sdk/openai chat model, zod tool, stopWhen", "ai"),
	}
}

func binArgv(name string) func(e *env, runs int) []string {
	return func(e *env, runs int) []string {
		return []string{filepath.Join(e.bin, name), "--runs", strconv.Itoa(runs)}
	}
}

func clientNames() []string {
	var names []string
	for _, c := range clients() {
		names = append(names, c.name)
	}
	return names
}

// selectClients returns the clients named in list (all for ""), always
// with the baseline first: every ratio needs it.
func selectClients(list string) ([]*client, error) {
	all := clients()
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	want := map[string]bool{"raw": true}
	for _, n := range strings.Split(list, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []*client
	for _, c := range all {
		if want[c.name] {
			out = append(out, c)
			delete(want, c.name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown client %q; the clients are %s", n, strings.Join(clientNames(), ", "))
	}
	return out, nil
}

// version returns the version of the library c measures.
func (c *client) version(e *env) string {
	if c.dep == "" {
		return ""
	}
	if c.dir == "node" {
		var pkg struct {
			Dependencies map[string]string `json:"dependencies"`
		}
		b, err := os.ReadFile(filepath.Join(e.benchDir, "node", "package.json"))
		if err != nil || json.Unmarshal(b, &pkg) != nil {
			return "?"
		}
		return pkg.Dependencies[c.dep]
	}
	b, err := os.ReadFile(filepath.Join(e.benchDir, c.dir, "go.mod"))
	if err != nil {
		return "?"
	}
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) >= 2 && f[0] == c.dep {
			return f[1]
		}
		if len(f) >= 3 && f[0] == "require" && f[1] == c.dep {
			return f[2]
		}
	}
	return "?"
}

// check verifies the output of one process: the summary line of the
// library clients, the last event of hrns run.
func (c *client) check(out []byte, runs, answerBytes int) error {
	if c.perProcess {
		lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
		var end struct {
			Type   string `json:"type"`
			Result struct {
				Status string `json:"status"`
				Answer string `json:"answer"`
			} `json:"result"`
		}
		if err := json.Unmarshal(lines[len(lines)-1], &end); err != nil || end.Type != "end" {
			return fmt.Errorf("the last line of hrns run is not its end event: %.200s", lines[len(lines)-1])
		}
		if end.Result.Status != "completed" || len(end.Result.Answer) != answerBytes {
			return fmt.Errorf("hrns run ended %q with an answer of %d bytes, want completed with %d", end.Result.Status, len(end.Result.Answer), answerBytes)
		}
		return nil
	}
	var s task.Summary
	if err := json.Unmarshal(bytes.TrimSpace(out), &s); err != nil {
		return fmt.Errorf("no summary line: %q", out)
	}
	if s.Runs != runs || s.AnswerBytes != runs*answerBytes {
		return fmt.Errorf("did %d runs with %d answer bytes, want %d runs with %d", s.Runs, s.AnswerBytes, runs, runs*answerBytes)
	}
	return nil
}
