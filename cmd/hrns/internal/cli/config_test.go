package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/responses"
	"github.com/hrns-dev/hrns/tools"
)

func writeFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigFormats(t *testing.T) {
	want := &Config{
		Provider: "local", Model: "qwen3", Tools: []string{"read_file", "list_files"}, MaxTurns: 7,
		Providers: map[string]Provider{"local": {Kind: "openai", BaseURL: "http://localhost:11434/v1", APIKeyEnv: "LOCAL_KEY", Headers: map[string]string{"X-Team": "core"}}},
	}
	toml := `provider = "local"
model = "qwen3"
tools = ["read_file", "list_files"]
max_turns = 7
[providers.local]
kind = "openai"
base_url = "http://localhost:11434/v1"
api_key_env = "LOCAL_KEY"
headers = { "X-Team" = "core" }
`
	yaml := `provider: local
model: qwen3
tools: [read_file, list_files]
max_turns: 7
providers:
  local:
    kind: openai
    base_url: http://localhost:11434/v1
    api_key_env: LOCAL_KEY
    headers: {X-Team: core}
`
	for name, content := range map[string]string{"config.toml": toml, "config.yaml": yaml} {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, name, content, 0o644)
			cfg, err := loadConfig(path, env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, cfg, cmp.AllowUnexported(Config{}), cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "path" }, cmp.Ignore())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, file, content string
		mode                os.FileMode
		want                string
	}{
		{"unknown toml key", "config.toml", "modle = \"x\"\n", 0o644, `unknown key "modle"`},
		{"unknown yaml key", "config.yaml", "modle: x\n", 0o644, "modle"},
		{"bad kind", "config.toml", "[providers.x]\nkind = \"bogus\"\n", 0o644, `kind "bogus" is not openai`},
		{"key readable by others", "config.toml", "[providers.x]\napi_key = \"sk-1\"\n", 0o644, "chmod 600"},
		{"syntax", "config.toml", "model = \n", 0o644, "config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(writeFile(t, tt.file, tt.content, tt.mode), env(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	if _, err := loadConfig(writeFile(t, "config.toml", "[providers.x]\napi_key = \"sk-1\"\n", 0o600), env(nil)); err != nil {
		t.Errorf("0600 file with a key: %v", err)
	}
	if cfg, err := loadConfig("", env(map[string]string{"HOME": t.TempDir()})); err != nil || cfg.Model != "" {
		t.Errorf("no config file: %v %+v", err, cfg)
	}
	if _, err := loadConfig("", env(map[string]string{"HRNS_CONFIG": filepath.Join(t.TempDir(), "missing.toml")})); err == nil {
		t.Errorf("a missing HRNS_CONFIG file must be an error")
	}
}

func TestModelPrecedence(t *testing.T) {
	cfg := &Config{Model: "cfg-model", Providers: map[string]Provider{
		"local":  {BaseURL: "http://local/v1", APIKeyEnv: "LOCAL_KEY", Model: "local-model"},
		"claude": {Kind: "anthropic", APIKey: "sk-ant", Model: "claude-x"},
		"resp":   {Kind: "openai-responses", APIKeyEnv: "RESP_KEY", Model: "gpt-r"},
		"gem":    {Kind: "gemini", APIKeyEnv: "GEM_KEY", Model: "gemini-x"},
	}}
	tests := []struct {
		name             string
		opts             runOptions
		agent            agentFile
		env              map[string]string
		wantKind         string
		wantURL, wantKey string
		wantModel        string
		wantErr          string
	}{
		{name: "env only", env: map[string]string{"OPENAI_API_KEY": "k", "OPENAI_MODEL": "env-model"}, wantKind: "openai", wantKey: "k", wantModel: "env-model"},
		{name: "flag beats env", opts: runOptions{model: "flag-model", baseURL: "http://flag/v1"}, env: map[string]string{"OPENAI_API_KEY": "k", "OPENAI_MODEL": "env-model", "OPENAI_BASE_URL": "http://env/v1"}, wantKind: "openai", wantURL: "http://flag/v1", wantKey: "k", wantModel: "flag-model"},
		{name: "config model", env: map[string]string{"OPENAI_API_KEY": "k"}, wantKind: "openai", wantKey: "k", wantModel: "cfg-model"},
		{name: "agent file model", agent: agentFile{Model: "agent-model"}, env: map[string]string{"OPENAI_API_KEY": "k", "OPENAI_MODEL": "env-model"}, wantKind: "openai", wantKey: "k", wantModel: "agent-model"},
		{name: "named provider", opts: runOptions{provider: "local"}, env: map[string]string{"LOCAL_KEY": "lk", "OPENAI_API_KEY": "not this"}, wantKind: "openai", wantURL: "http://local/v1", wantKey: "lk", wantModel: "local-model"},
		{name: "anthropic from config", opts: runOptions{provider: "claude"}, wantKind: "anthropic", wantKey: "sk-ant", wantModel: "claude-x"},
		{name: "anthropic from env", opts: runOptions{provider: "anthropic", model: "claude-y"}, env: map[string]string{"ANTHROPIC_API_KEY": "ak"}, wantKind: "anthropic", wantKey: "ak", wantModel: "claude-y"},
		{name: "responses from env", opts: runOptions{provider: "openai-responses"}, env: map[string]string{"OPENAI_API_KEY": "ok", "OPENAI_MODEL": "gpt-5", "OPENAI_BASE_URL": "http://env/v1"}, wantKind: "openai-responses", wantURL: "http://env/v1", wantKey: "ok", wantModel: "gpt-5"},
		{name: "responses from config", opts: runOptions{provider: "resp"}, env: map[string]string{"RESP_KEY": "rk", "OPENAI_API_KEY": "not this"}, wantKind: "openai-responses", wantKey: "rk", wantModel: "gpt-r"},
		{name: "responses without a key", opts: runOptions{provider: "openai-responses", model: "m"}, wantErr: "no OpenAI API key"},
		{name: "gemini from env", opts: runOptions{provider: "gemini"}, env: map[string]string{"GEMINI_API_KEY": "gk", "GOOGLE_API_KEY": "not this", "GEMINI_MODEL": "gemini-2.5-flash", "GEMINI_BASE_URL": "http://env"}, wantKind: "gemini", wantURL: "http://env", wantKey: "gk", wantModel: "gemini-2.5-flash"},
		{name: "gemini with GOOGLE_API_KEY", opts: runOptions{provider: "gemini", model: "gemini-2.5-pro"}, env: map[string]string{"GOOGLE_API_KEY": "go"}, wantKind: "gemini", wantKey: "go", wantModel: "gemini-2.5-pro"},
		{name: "gemini from config", opts: runOptions{provider: "gem"}, env: map[string]string{"GEM_KEY": "ck", "GEMINI_API_KEY": "not this", "GOOGLE_API_KEY": "not this"}, wantKind: "gemini", wantKey: "ck", wantModel: "gemini-x"},
		{name: "gemini without a key", opts: runOptions{provider: "gemini", model: "m"}, wantErr: "set GEMINI_API_KEY (or GOOGLE_API_KEY"},
		{name: "no key", opts: runOptions{model: "m"}, wantErr: "no OpenAI API key"},
		{name: "unknown provider", opts: runOptions{provider: "nope"}, wantErr: `unknown provider "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			if tt.name == "no key" {
				c = &Config{}
			}
			m, name, err := buildModel(&tt.opts, c, &tt.agent, env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kind, url, key, model string
			switch m := m.(type) {
			case *openai.Client:
				kind, url, key, model = "openai", m.BaseURL, m.APIKey, m.Model
			case *anthropic.Client:
				kind, url, key, model = "anthropic", m.BaseURL, m.APIKey, m.Model
			case *responses.Client:
				kind, url, key, model = "openai-responses", m.BaseURL, m.APIKey, m.Model
			case *gemini.Client:
				kind, url, key, model = "gemini", m.BaseURL, m.APIKey, m.Model
			}
			got := []string{kind, url, key, model, name}
			want := []string{tt.wantKind, tt.wantURL, tt.wantKey, tt.wantModel, tt.wantModel}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAgentFile(t *testing.T) {
	path := writeFile(t, "reviewer.md", "---\nname: reviewer\nmodel: gpt-x\ntools: read_file, list_files\nmax_turns: 9\n---\nYou review code.\n\nBe terse.\n", 0o644)
	o := runOptions{agentFile: path}
	a, err := o.loadAgent()
	if err != nil {
		t.Fatal(err)
	}
	want := &agentFile{Name: "reviewer", Model: "gpt-x", Tools: toolsList{"read_file", "list_files"}, MaxTurns: 9, System: "You review code.\n\nBe terse."}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for name, content := range map[string]string{
		"unclosed":      "---\nname: x\nbody",
		"unknown field": "---\ncolour: red\n---\nbody",
	} {
		o := runOptions{agentFile: writeFile(t, "a.md", content, 0o644)}
		if _, err := o.loadAgent(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	plain := runOptions{agentFile: writeFile(t, "p.md", "Just a prompt.\n", 0o644)}
	if a, err := plain.loadAgent(); err != nil || a.System != "Just a prompt." {
		t.Errorf("no front matter: %+v %v", a, err)
	}
}

func TestParseInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	j := fs.Bool("json", false, "")
	m := fs.String("model", "", "")
	pos, err := parseInterspersed(fs, []string{"fix", "--json", "the", "--model", "x", "bug", "--", "--not-a-flag"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"fix", "the", "bug", "--not-a-flag"}, pos); diff != "" || !*j || *m != "x" {
		t.Errorf("pos (-want +got):\n%s json=%v model=%q", diff, *j, *m)
	}
}

func TestToolSelection(t *testing.T) {
	if diff := cmp.Diff(defaultTools, toolNames("", nil, nil)); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff(append(tools.Names(), "run_code", "task"), toolNames("all", nil, nil)); diff != "" {
		t.Error(diff)
	}
	if got := toolNames("none", nil, nil); len(got) != 0 {
		t.Errorf("none = %v", got)
	}
	if diff := cmp.Diff([]string{"web_fetch"}, toolNames("web_fetch", []string{"read_file"}, []string{"list_files"})); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"read_file"}, toolNames("", []string{"read_file"}, []string{"list_files"})); diff != "" {
		t.Error(diff)
	}
}

// TestEnvironmentBeatsConfig: OPENAI_BASE_URL, OPENAI_API_KEY and
// OPENAI_MODEL win over the config's [providers.openai], as docs/cli.md
// says; the file fills what the environment leaves unset.
func TestEnvironmentBeatsConfig(t *testing.T) {
	cfg := &Config{Providers: map[string]Provider{"openai": {BaseURL: "http://cfg/v1", APIKey: "cfg-key", Model: "cfg-model"}}}
	m, _, err := buildModel(&runOptions{}, cfg, &agentFile{}, env(map[string]string{"OPENAI_BASE_URL": "http://env/v1", "OPENAI_API_KEY": "env-key", "OPENAI_MODEL": "env-model"}))
	if err != nil {
		t.Fatal(err)
	}
	if c := m.(*openai.Client); c.BaseURL != "http://env/v1" || c.APIKey != "env-key" || c.Model != "env-model" {
		t.Errorf("got %s %s %s, want the environment's", c.BaseURL, c.APIKey, c.Model)
	}
	m, _, err = buildModel(&runOptions{}, cfg, &agentFile{}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c := m.(*openai.Client); c.BaseURL != "http://cfg/v1" || c.APIKey != "cfg-key" || c.Model != "cfg-model" {
		t.Errorf("got %s %s %s, want the config's", c.BaseURL, c.APIKey, c.Model)
	}
}
