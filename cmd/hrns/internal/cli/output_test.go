package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestRunOutputSchema runs hrns run --output-schema end to end against a
// scripted OpenAI-compatible server.
func TestRunOutputSchema(t *testing.T) {
	dir := t.TempDir()
	schemaFile := filepath.Join(dir, "city.json")
	const schema = `{"type":"object","properties":{"name":{"type":"string"},"population":{"type":"integer"}},"required":["name","population"],"additionalProperties":false}`
	if err := os.WriteFile(schemaFile, []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(notJSON, []byte(`{"type":`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		replies  []string
		args     []string
		code     int
		stdout   string
		stderr   string // a substring
		requests int
	}{
		{"valid after an invalid answer", []string{"It is Paris.", `{"name":"Paris","population":2100000}`},
			[]string{"--output-schema", schemaFile}, ExitOK, `{"name":"Paris","population":2100000}` + "\n",
			"It is Paris.\n(the answer above does not match the output schema: the answer is not valid JSON", 2},
		{"never valid", []string{"a", `{"name":"x"}`, `{"name":"x","population":"many"}`},
			[]string{"--output-schema", schemaFile}, ExitFailed, "", "does not match the output schema after 3 attempt(s)", 3},
		{"schema file not JSON", nil, []string{"--output-schema", notJSON}, ExitUsage, "", "--output-schema", 0},
		{"schema file missing", nil, []string{"--output-schema", filepath.Join(dir, "nope.json")}, ExitUsage, "", "no such file", 0},
		{"not with --json", nil, []string{"--output-schema", schemaFile, "--json"}, ExitUsage, "", "cannot be used together", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var replies []openaitest.Reply
			for _, r := range tt.replies {
				replies = append(replies, openaitest.Reply{Text: r})
			}
			srv := openaitest.NewServer(replies...)
			defer srv.Close()
			var out, errOut bytes.Buffer
			args := append([]string{"run", "--base-url", srv.URL(), "--model", "m", "--tools", "none", "--no-skills", "--workdir", t.TempDir()}, tt.args...)
			args = append(args, "Which city?")
			code := Run(t.Context(), args, &IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", code, tt.code, errOut.String())
			}
			if out.String() != tt.stdout {
				t.Errorf("stdout = %q, want %q", out.String(), tt.stdout)
			}
			if !strings.Contains(errOut.String(), tt.stderr) {
				t.Errorf("stderr does not contain %q:\n%s", tt.stderr, errOut.String())
			}
			reqs := srv.Requests()
			if len(reqs) != tt.requests {
				t.Fatalf("%d requests, want %d", len(reqs), tt.requests)
			}
			for _, r := range reqs {
				var body struct {
					ResponseFormat struct {
						JSONSchema struct {
							Name   string          `json:"name"`
							Schema json.RawMessage `json:"schema"`
							Strict bool            `json:"strict"`
						} `json:"json_schema"`
					} `json:"response_format"`
				}
				if err := json.Unmarshal(r.Body, &body); err != nil {
					t.Fatal(err)
				}
				if string(body.ResponseFormat.JSONSchema.Schema) != schema || !body.ResponseFormat.JSONSchema.Strict || body.ResponseFormat.JSONSchema.Name != "city" {
					t.Errorf("response_format %+v", body.ResponseFormat)
				}
			}
		})
	}
}
