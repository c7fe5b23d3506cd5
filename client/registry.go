package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/hrns-dev/hrns/api"
)

// The registries' entries, as the API takes and returns them.
type (
	// AgentSpec is a registered agent (/api/v2/agents).
	AgentSpec = api.AgentSpec
	// EnvironmentSpec is a registered environment (/api/v2/environments).
	EnvironmentSpec = api.EnvironmentSpec
	// SkillSpec is a registered skill (/api/v2/skills).
	SkillSpec = api.SkillSpec
)

// Ref is a reference by name to a registered entry (or, among
// environments, a kind the server provides), for the Environments,
// Skills and Subagents of an [AgentSpec].
func Ref(name string) json.RawMessage {
	b, _ := json.Marshal(name)
	return b
}

// RegistryListOptions select a page of a registry. The zero value lists
// the first page of 10, newest first.
type RegistryListOptions struct {
	// Name keeps the entries whose name (an environment's id) contains
	// it, ignoring case.
	Name string
	// Search keeps the entries whose name or description contains it.
	Search string
	// Kind keeps the environments of a kind: "web" or "desktop".
	Kind string
	// Sort is "created_at", "-created_at", or the name field with or
	// without "-": "agent_name", "id" or "name".
	Sort string
	// Page (from 1) and Size (1 to 1000) select the page.
	Page, Size int
}

// A RegistryPage is a page of entries; the server's read-only entries
// come first.
type RegistryPage[T any] struct {
	Items []T `json:"items"`
	Total int `json:"total"`
	Page  int `json:"page"`
}

// registryPath is the path of a registry's entry: each segment of the name
// escaped, a slash kept ("acme/support").
func registryPath(collection, name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return collection + "/" + strings.Join(parts, "/")
}

func listQuery(nameParam string, o *RegistryListOptions) string {
	q := url.Values{}
	if o != nil {
		set := func(k, v string) {
			if v != "" {
				q.Set(k, v)
			}
		}
		set(nameParam, o.Name)
		set("search", o.Search)
		set("kind", o.Kind)
		set("sort", o.Sort)
		if o.Page > 0 {
			q.Set("page", strconv.Itoa(o.Page))
		}
		if o.Size > 0 {
			q.Set("size", strconv.Itoa(o.Size))
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// send makes a request of a registry and decodes the entry it answers.
func send[T any](ctx context.Context, c *Client, method, path string, body any, retry bool) (*T, error) {
	var out T
	if _, _, err := c.call(ctx, method, path, nil, body, &out, retry); err != nil {
		return nil, err
	}
	return &out, nil
}

const (
	agentsPath       = "/api/v2/agents"
	environmentsPath = "/api/v2/environments"
	skillsPath       = "/api/v2/skills"
)

// CreateAgent registers an agent for this key; sessions then name it
// (nil Environments are sent as none). A
// name already used answers [ErrConflict], an invalid definition
// [ErrInvalid] (the name of an unknown environment, skill or subagent
// too).
func (c *Client) CreateAgent(ctx context.Context, a *AgentSpec) (*AgentSpec, error) {
	return send[AgentSpec](ctx, c, "POST", agentsPath, withEnvironments(a), false)
}

// withEnvironments sends nil Environments as an empty list: the API
// requires the field.
func withEnvironments(a *AgentSpec) *AgentSpec {
	if a == nil || a.Environments != nil {
		return a
	}
	b := *a
	b.Environments = []json.RawMessage{}
	return &b
}

// ListAgents returns a page of the agents this key sees: the server's
// (read-only) and its own.
func (c *Client) ListAgents(ctx context.Context, opts *RegistryListOptions) (*RegistryPage[AgentSpec], error) {
	return send[RegistryPage[AgentSpec]](ctx, c, "GET", agentsPath+listQuery("agent_name", opts), nil, true)
}

// GetAgent returns the agent with the name; with resolve, the names it
// gives of environments, skills and subagents are replaced by their
// definitions. An unknown name (or another key's agent) is [ErrNotFound].
func (c *Client) GetAgent(ctx context.Context, name string, resolve bool) (*AgentSpec, error) {
	path := registryPath(agentsPath, name)
	if resolve {
		path += "?resolve=true"
	}
	return send[AgentSpec](ctx, c, "GET", path, nil, true)
}

// ReplaceAgent replaces the agent named a.Name with a. The server's
// agents are read-only (an [APIError] with StatusCode 403).
func (c *Client) ReplaceAgent(ctx context.Context, a *AgentSpec) (*AgentSpec, error) {
	return send[AgentSpec](ctx, c, "PUT", registryPath(agentsPath, a.Name), withEnvironments(a), true)
}

// PatchAgent changes the fields of the agent that patch sets (a value
// marshalled as a JSON object, such as map[string]any{"model": "m2"}); a
// field set to nil returns to its default.
func (c *Client) PatchAgent(ctx context.Context, name string, patch any) (*AgentSpec, error) {
	return send[AgentSpec](ctx, c, "PATCH", registryPath(agentsPath, name), patch, true)
}

// DeleteAgent removes the agent.
func (c *Client) DeleteAgent(ctx context.Context, name string) error {
	_, _, err := c.call(ctx, "DELETE", registryPath(agentsPath, name), nil, nil, nil, false)
	return err
}

// CreateEnvironment registers an environment for this key; agents name it
// by its id.
func (c *Client) CreateEnvironment(ctx context.Context, e *EnvironmentSpec) (*EnvironmentSpec, error) {
	return send[EnvironmentSpec](ctx, c, "POST", environmentsPath, e, false)
}

// ListEnvironments returns a page of the environments this key sees.
func (c *Client) ListEnvironments(ctx context.Context, opts *RegistryListOptions) (*RegistryPage[EnvironmentSpec], error) {
	return send[RegistryPage[EnvironmentSpec]](ctx, c, "GET", environmentsPath+listQuery("id", opts), nil, true)
}

// GetEnvironment returns the environment with the id.
func (c *Client) GetEnvironment(ctx context.Context, id string) (*EnvironmentSpec, error) {
	return send[EnvironmentSpec](ctx, c, "GET", registryPath(environmentsPath, id), nil, true)
}

// ReplaceEnvironment replaces the environment e.ID with e.
func (c *Client) ReplaceEnvironment(ctx context.Context, e *EnvironmentSpec) (*EnvironmentSpec, error) {
	return send[EnvironmentSpec](ctx, c, "PUT", registryPath(environmentsPath, e.ID), e, true)
}

// PatchEnvironment changes the fields of the environment that patch sets.
func (c *Client) PatchEnvironment(ctx context.Context, id string, patch any) (*EnvironmentSpec, error) {
	return send[EnvironmentSpec](ctx, c, "PATCH", registryPath(environmentsPath, id), patch, true)
}

// DeleteEnvironment removes the environment.
func (c *Client) DeleteEnvironment(ctx context.Context, id string) error {
	_, _, err := c.call(ctx, "DELETE", registryPath(environmentsPath, id), nil, nil, nil, false)
	return err
}

// CreateSkill registers a skill, with its files, for this key; agents name
// it, and their sessions use it through the skill tools.
func (c *Client) CreateSkill(ctx context.Context, s *SkillSpec) (*SkillSpec, error) {
	return send[SkillSpec](ctx, c, "POST", skillsPath, s, false)
}

// ListSkills returns a page of the skills this key sees, without their
// files.
func (c *Client) ListSkills(ctx context.Context, opts *RegistryListOptions) (*RegistryPage[SkillSpec], error) {
	return send[RegistryPage[SkillSpec]](ctx, c, "GET", skillsPath+listQuery("name", opts), nil, true)
}

// GetSkill returns the skill with the name, with its files.
func (c *Client) GetSkill(ctx context.Context, name string) (*SkillSpec, error) {
	return send[SkillSpec](ctx, c, "GET", registryPath(skillsPath, name), nil, true)
}

// ReplaceSkill replaces the skill s.Name with s.
func (c *Client) ReplaceSkill(ctx context.Context, s *SkillSpec) (*SkillSpec, error) {
	return send[SkillSpec](ctx, c, "PUT", registryPath(skillsPath, s.Name), s, true)
}

// PatchSkill changes the fields of the skill that patch sets.
func (c *Client) PatchSkill(ctx context.Context, name string, patch any) (*SkillSpec, error) {
	return send[SkillSpec](ctx, c, "PATCH", registryPath(skillsPath, name), patch, true)
}

// DeleteSkill removes the skill.
func (c *Client) DeleteSkill(ctx context.Context, name string) error {
	_, _, err := c.call(ctx, "DELETE", registryPath(skillsPath, name), nil, nil, nil, false)
	return err
}
