package api

import "encoding/json"

// AgentSpec is a registered agent, as /api/v2/agents takes and returns
// it. Entries of Environments, Subagents and Skills are a registered
// entry's name (a JSON string) or an inline definition (an object).
type AgentSpec struct {
	Name         string            `json:"name"`
	Description  string            `json:"description"`
	Environments []json.RawMessage `json:"environments"`
	Model        *string           `json:"model"`
	// ReasoningEffort is one of [ReasoningEfforts], or nil for the
	// model's default.
	ReasoningEffort *string           `json:"reasoning_effort,omitempty"`
	Instructions    *string           `json:"instructions"`
	Subagents       []json.RawMessage `json:"subagents"`
	Skills          []json.RawMessage `json:"skills"`
	// AnswerFormat is a JSON Schema object, or nil.
	AnswerFormat json.RawMessage  `json:"answer_format"`
	Tools        []ToolDefinition `json:"tools"`
	// MaxSteps is the step budget of the agent's sessions that set none
	// (an hrns addition); nil means the server's.
	MaxSteps *int `json:"max_steps,omitempty"`
	// ReadOnly marks an agent of the server's configuration (an hrns
	// addition): callers may use it, not change it.
	ReadOnly bool `json:"read_only,omitempty"`
}

// EnvironmentSpec is a registered environment, as /api/v2/environments
// takes and returns it: a web browser (Kind "web"), a desktop (Kind
// "desktop"), a workstation (Kind "workstation") or an Android device
// (Kind "android"). Fields left nil take the API's defaults.
type EnvironmentSpec struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Host is "cloud" or "user_device" for a browser, "user_device" for
	// a desktop.
	Host      string  `json:"host,omitempty"`
	SessionID *string `json:"session_id,omitempty"`

	// The fields of a browser only.
	StartURL *string         `json:"start_url,omitempty"`
	Headless *bool           `json:"headless,omitempty"`
	Mode     json.RawMessage `json:"mode,omitempty"`
	// PageChars bounds the characters of page text the agent reads per
	// page (snapshots; with the multimodal mode, the page's Markdown).
	PageChars                *int            `json:"page_chars,omitempty"`
	Lazy                     *bool           `json:"lazy,omitempty"`
	VaultID                  *string         `json:"vault_id,omitempty"`
	BrowserProfileID         *string         `json:"browser_profile_id,omitempty"`
	UseDefaultBrowserProfile *bool           `json:"use_default_browser_profile,omitempty"`
	PersistBrowserProfile    *bool           `json:"persist_browser_profile,omitempty"`
	Network                  json.RawMessage `json:"network,omitempty"`

	// Image is an Android environment's emulator image.
	Image *string `json:"image,omitempty"`

	// MCPServers are MCP servers whose tools the agent gets with the
	// environment (any kind the server runs).
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`

	// ReadOnly marks an environment the server provides (an hrns
	// addition).
	ReadOnly bool `json:"read_only,omitempty"`
}

// MCPServer is an MCP server an environment connects the agent to, as H's
// API gives it: a command run over stdio, or an HTTP endpoint. The server
// answers env and headers redacted ([RedactedValue]): they may carry
// secrets.
type MCPServer struct {
	// Name is unique among the environment's servers; the server's tools
	// are offered as NAME__TOOL.
	Name string `json:"name"`
	// Transport is "stdio", "streamable_http" or "sse".
	Transport string `json:"transport"`
	// Command, Args and Env are the program a stdio server runs, its
	// arguments and the variables added to its environment.
	Command *string           `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL is the endpoint of an HTTP server (streamable_http or sse),
	// and Headers are sent with each request to it.
	URL     *string           `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// The transports of [MCPServer].
const (
	MCPStdio          = "stdio"
	MCPStreamableHTTP = "streamable_http"
	MCPSSE            = "sse"
)

// RedactedValue stands for the value of an MCP server's env variable or
// header in what the server answers.
const RedactedValue = "[redacted]"

// SkillSpec is a registered skill, as /api/v2/skills takes and returns it.
type SkillSpec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Body is the Markdown instructions the agent loads.
	Body       string  `json:"body"`
	Source     *string `json:"source"`
	URLPattern *string `json:"url_pattern"`
	// Files are more files of the skill by relative path (an hrns
	// addition): references and templates its body points to, which the
	// agent reads with the read_skill tool. Text only; lists leave them
	// out.
	Files map[string]string `json:"files,omitempty"`
}
