package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hrns-dev/hrns/loop"
)

// result is what a tool call returned.
type result struct {
	text    string
	isError bool
	err     error
}

// failed reports whether the call failed, by error or by an error output,
// and the text the model would read.
func (r result) failed() bool { return r.err != nil || r.isError }

func (r result) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return r.text
}

// callTool runs the handler of the tool name in ts with args, as the loop
// would after validation.
func callTool(t testing.TB, ctx context.Context, ts *loop.Toolset, name string, args any) result {
	t.Helper()
	def, ok := ts.Lookup(name)
	if !ok {
		t.Fatalf("no tool %q in %v", name, ts.Names())
	}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	out, err := def.Handler(ctx, &loop.Call{ID: "c1", Name: name, Arguments: raw, Args: m})
	if err != nil {
		return result{err: err}
	}
	if out == nil {
		return result{}
	}
	var text string
	for _, p := range out.Content {
		text += p.Text
	}
	return result{text: text, isError: out.IsError}
}

// writeTree creates files under dir: each key is a slash path, each value
// its content.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
