package mcp_test

// Tests against MCP servers that hrns did not write: the reference servers
// server-everything and server-filesystem, installed from npm into
// testdata/servers by .ci/setup-npm and started over stdio with node.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
)

// nodeServer returns the spec of the npm-installed server pkg, run with
// node, or skips the test when the servers are not installed.
func nodeServer(t *testing.T, name, pkg string, args ...string) *mcp.Spec {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "servers", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Skipf("the MCP test servers are not installed (%s is missing): run .ci/setup-npm", script)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not in PATH; install Node.js and run .ci/setup-npm")
	}
	return &mcp.Spec{Name: name, Command: node, Args: append([]string{script}, args...)}
}

func mount(t *testing.T, spec *mcp.Spec) *mcp.Mounted {
	t.Helper()
	m, err := mcp.Mount(t.Context(), spec)
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// call calls a tool of ts as the loop would, after checking it exists.
func call(t *testing.T, ts *loop.Toolset, name, args string) (*loop.Output, error) {
	t.Helper()
	def, ok := ts.Lookup(name)
	if !ok {
		t.Fatalf("no tool %q in %v", name, ts.Names())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		t.Fatal(err)
	}
	return def.Handler(t.Context(), &loop.Call{ID: "c1", Name: name, Arguments: json.RawMessage(args), Args: m})
}

func TestEverythingServer(t *testing.T) {
	m := mount(t, nodeServer(t, "everything", "server-everything"))
	ts := m.Toolset()

	t.Run("tools", func(t *testing.T) {
		for _, name := range []string{"everything__echo", "everything__get-sum", "everything__get-tiny-image", "everything__get-resource-reference"} {
			if _, ok := ts.Lookup(name); !ok {
				t.Errorf("no tool %q in %v", name, ts.Names())
			}
		}
		echo, _ := ts.Lookup("everything__echo")
		var schema struct {
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
		}
		if err := json.Unmarshal(echo.InputSchema, &schema); err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string]any{"message": {"type": "string", "description": "Message to echo"}}
		if diff := cmp.Diff(want, schema.Properties); diff != "" {
			t.Errorf("echo's schema properties (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"message"}, schema.Required); diff != "" {
			t.Errorf("echo's required (-want +got):\n%s", diff)
		}
	})

	t.Run("approval policy", func(t *testing.T) {
		tests := []struct {
			name                     string
			wantApproval, wantConcur bool
		}{
			{"everything__get-tiny-image", false, true}, // readOnlyHint
			{"everything__toggle-simulated-logging", true, false},
		}
		for _, tt := range tests {
			def, ok := ts.Lookup(tt.name)
			if !ok {
				t.Fatalf("no tool %q", tt.name)
			}
			if def.RequiresApproval != tt.wantApproval || def.Concurrent != tt.wantConcur {
				t.Errorf("%s: RequiresApproval=%v Concurrent=%v, want %v %v", tt.name, def.RequiresApproval, def.Concurrent, tt.wantApproval, tt.wantConcur)
			}
		}
	})

	t.Run("text", func(t *testing.T) {
		tests := []struct {
			tool, args, want string
		}{
			{"everything__echo", `{"message":"hello there"}`, "Echo: hello there"},
			{"everything__get-sum", `{"a":2,"b":3}`, "The sum of 2 and 3 is 5."},
		}
		for _, tt := range tests {
			out, err := call(t, ts, tt.tool, tt.args)
			if err != nil {
				t.Fatalf("%s: %v", tt.tool, err)
			}
			want := &loop.Output{Content: []llm.Part{llm.TextPart(tt.want)}}
			if diff := cmp.Diff(want, out); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.tool, diff)
			}
		}
	})

	t.Run("image", func(t *testing.T) {
		out, err := call(t, ts, "everything__get-tiny-image", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []llm.PartKind
		for _, p := range out.Content {
			kinds = append(kinds, p.Kind)
		}
		if diff := cmp.Diff([]llm.PartKind{llm.PartText, llm.PartImage, llm.PartText}, kinds); diff != "" {
			t.Fatalf("parts (-want +got):\n%s", diff)
		}
		img := out.Content[1].Media
		if img.MIMEType != "image/png" {
			t.Errorf("MIME type %q, want image/png", img.MIMEType)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(img.Data))
		if err != nil || cfg.Width != 20 || cfg.Height != 20 {
			t.Errorf("the image is not the 20×20 PNG logo: %+v, %v", cfg, err)
		}
	})

	t.Run("embedded resources", func(t *testing.T) {
		out, err := call(t, ts, "everything__get-resource-reference", `{"resourceType":"Text","resourceId":2}`)
		if err != nil {
			t.Fatal(err)
		}
		text := llm.Message{Parts: out.Content}.Text()
		if !strings.Contains(text, "Resource 2") {
			t.Errorf("the text resource is not in the output: %q", text)
		}
		out, err = call(t, ts, "everything__get-resource-reference", `{"resourceType":"Blob","resourceId":3}`)
		if err != nil {
			t.Fatal(err)
		}
		if out.IsError {
			t.Fatalf("error: %v", out.Content)
		}
		if got := (llm.Message{Parts: out.Content}).Text(); got == "" {
			t.Errorf("no text for the blob resource: %+v", out.Content)
		}
	})

	t.Run("structured content", func(t *testing.T) {
		out, err := call(t, ts, "everything__get-structured-content", `{"location":"Chicago"}`)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(llm.Message{Parts: out.Content}.Text()), &v); err != nil {
			t.Fatalf("the output is not the structured JSON: %v: %+v", err, out.Content)
		}
		if _, ok := v["temperature"]; !ok {
			t.Errorf("no temperature in %v", v)
		}
	})

	t.Run("invalid arguments", func(t *testing.T) {
		// The server checks arguments too (the loop checks them first).
		out, err := call(t, ts, "everything__get-sum", `{"a":"two","b":3}`)
		if err != nil {
			t.Fatal(err)
		}
		if !out.IsError {
			t.Errorf("IsError = false: %+v", out.Content)
		}
	})
}

func TestFilesystemServer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ship it\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, tinyImage()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dot.png"), pngData.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := nodeServer(t, "fs", "server-filesystem", dir)
	m := mount(t, spec)
	ts := m.Toolset()

	t.Run("read", func(t *testing.T) {
		out, err := call(t, ts, "fs__read_text_file", `{"path":"`+filepath.Join(dir, "notes.txt")+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		want := &loop.Output{Content: []llm.Part{llm.TextPart("ship it\n")}}
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	t.Run("image file", func(t *testing.T) {
		out, err := call(t, ts, "fs__read_media_file", `{"path":"`+filepath.Join(dir, "dot.png")+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		want := &loop.Output{Content: []llm.Part{llm.ImagePart("image/png", pngData.Bytes())}}
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	t.Run("error result", func(t *testing.T) {
		out, err := call(t, ts, "fs__read_text_file", `{"path":"`+filepath.Join(dir, "missing.txt")+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		if !out.IsError {
			t.Errorf("IsError = false for a missing file: %+v", out.Content)
		}
		if text := (llm.Message{Parts: out.Content}).Text(); !strings.Contains(text, "missing.txt") {
			t.Errorf("the error does not name the file: %q", text)
		}
	})

	t.Run("outside the allowed directory", func(t *testing.T) {
		out, err := call(t, ts, "fs__read_text_file", `{"path":"/etc/hostname"}`)
		if err != nil {
			t.Fatal(err)
		}
		if !out.IsError {
			t.Errorf("IsError = false for a path outside the allowed directory: %+v", out.Content)
		}
	})
}

func TestServerCrash(t *testing.T) {
	m := mount(t, nodeServer(t, "everything", "server-everything"))
	ts := m.Toolset()
	echo := func() (*loop.Output, error) { return call(t, ts, "everything__echo", `{"message":"hi"}`) }
	if _, err := echo(); err != nil {
		t.Fatal(err)
	}
	pid := m.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// The next call says the server died, whether or not the death was
	// noticed before it.
	_, err := echo()
	if err == nil {
		t.Fatal("the call after the kill succeeded")
	}
	for _, want := range []string{`mcp server "everything"`, "exited", "signal: killed", "started again at the next call"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	// The call after that starts the server again.
	out, err := echo()
	if err != nil {
		t.Fatalf("the call after the failed one: %v", err)
	}
	if got := (llm.Message{Parts: out.Content}).Text(); got != "Echo: hi" {
		t.Errorf("got %q", got)
	}
	if m.PID() == pid || m.PID() == 0 {
		t.Errorf("PID %d after the restart, was %d", m.PID(), pid)
	}
}

func TestServerExitsAtStart(t *testing.T) {
	spec := nodeServer(t, "bad", "server-filesystem") // no directory: it exits
	spec.Args = append(spec.Args, "/does/not/exist")
	_, err := mcp.Mount(t.Context(), spec)
	if err == nil {
		t.Fatal("Mount succeeded")
	}
	for _, want := range []string{`mcp server "bad"`, "its stderr ends with", "/does/not/exist"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestClose(t *testing.T) {
	m, err := mcp.Mount(t.Context(), nodeServer(t, "everything", "server-everything"))
	if err != nil {
		t.Fatal(err)
	}
	ts := m.Toolset()
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := call(t, ts, "everything__echo", `{"message":"hi"}`); !errors.Is(err, mcp.ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
}

func TestCallTimeout(t *testing.T) {
	m := mount(t, nodeServer(t, "everything", "server-everything"))
	def, _ := m.Toolset().Lookup("everything__trigger-long-running-operation")
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // a call whose time is up before it starts
	_, err := def.Handler(ctx, &loop.Call{ID: "c1", Arguments: json.RawMessage(`{"duration":30,"steps":2}`)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	// The server is still usable.
	if _, err := call(t, m.Toolset(), "everything__echo", `{"message":"still here"}`); err != nil {
		t.Errorf("call after a cancelled call: %v", err)
	}
}
