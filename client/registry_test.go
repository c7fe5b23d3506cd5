package client_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

func TestRegistries(t *testing.T) {
	url, _ := startServer(t, &session.Options{
		Agents:       map[string]*session.AgentConfig{"reviewer": {Description: "Reviews."}},
		Environments: map[string]*loop.Toolset{"web": {}},
	},
		calls("call_1", "load_skill", `{"name":"acme/lookup"}`),
		openaitest.Reply{Text: "shipped"},
	)
	c := client.New(url, apiKey, nil)
	ctx := t.Context()

	env, err := c.CreateEnvironment(ctx, &client.EnvironmentSpec{ID: "shop"})
	if err != nil || env.Kind != "web" {
		t.Fatalf("CreateEnvironment = %+v, %v", env, err)
	}
	if _, err := c.CreateEnvironment(ctx, &client.EnvironmentSpec{ID: "shop"}); !errors.Is(err, client.ErrConflict) {
		t.Errorf("creating it twice: %v, want ErrConflict", err)
	}
	// Ids are escaped in paths, a slash kept.
	const odd = "shop floor/50% off?#"
	if _, err := c.CreateEnvironment(ctx, &client.EnvironmentSpec{ID: odd}); err != nil {
		t.Fatal(err)
	}
	if e, err := c.GetEnvironment(ctx, odd); err != nil || e.ID != odd {
		t.Errorf("GetEnvironment(%q) = %+v, %v", odd, e, err)
	}
	if err := c.DeleteEnvironment(ctx, odd); err != nil {
		t.Errorf("DeleteEnvironment(%q): %v", odd, err)
	}
	skill, err := c.CreateSkill(ctx, &client.SkillSpec{Name: "acme/lookup", Description: "Looks orders up.", Body: "Read api.md.", Files: map[string]string{"api.md": "GET /orders"}})
	if err != nil || skill.Files["api.md"] != "GET /orders" {
		t.Fatalf("CreateSkill = %+v, %v", skill, err)
	}
	agent, err := c.CreateAgent(ctx, &client.AgentSpec{Name: "acme/support", Description: "Answers.",
		Environments: []json.RawMessage{client.Ref("shop")}, Skills: []json.RawMessage{client.Ref("acme/lookup")}})
	if err != nil || agent.Name != "acme/support" {
		t.Fatalf("CreateAgent = %+v, %v", agent, err)
	}
	if _, err := c.CreateAgent(ctx, &client.AgentSpec{Name: "Bad Name", Description: "x"}); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("an invalid agent: %v, want ErrInvalid", err)
	}

	got, err := c.GetAgent(ctx, "acme/support", true)
	if err != nil || len(got.Environments) != 1 || len(got.Skills) != 1 {
		t.Fatalf("GetAgent(resolve) = %+v, %v", got, err)
	}
	var resolved client.SkillSpec
	if json.Unmarshal(got.Skills[0], &resolved); resolved.Body != "Read api.md." {
		t.Errorf("resolved skill = %s", got.Skills[0])
	}
	agents, err := c.ListAgents(ctx, &client.RegistryListOptions{Sort: "agent_name"})
	if err != nil || agents.Total != 2 || agents.Items[0].Name != "reviewer" || !agents.Items[0].ReadOnly || agents.Items[1].Name != "acme/support" {
		t.Errorf("ListAgents = %+v, %v", agents, err)
	}
	envs, err := c.ListEnvironments(ctx, &client.RegistryListOptions{Kind: "web", Name: "SHO"})
	if err != nil || envs.Total != 1 || envs.Items[0].ID != "shop" {
		t.Errorf("ListEnvironments = %+v, %v", envs, err)
	}
	skills, err := c.ListSkills(ctx, &client.RegistryListOptions{Search: "orders"})
	if err != nil || skills.Total != 1 || skills.Items[0].Files != nil {
		t.Errorf("ListSkills = %+v, %v", skills, err)
	}

	m := "m2"
	if a, err := c.PatchAgent(ctx, "acme/support", map[string]any{"model": m}); err != nil || a.Model == nil || *a.Model != m {
		t.Errorf("PatchAgent = %+v, %v", a, err)
	}
	if e, err := c.PatchEnvironment(ctx, "shop", map[string]any{"headless": true}); err != nil || e.Headless == nil || !*e.Headless {
		t.Errorf("PatchEnvironment = %+v, %v", e, err)
	}
	if s, err := c.PatchSkill(ctx, "acme/lookup", map[string]any{"description": "Finds orders."}); err != nil || s.Description != "Finds orders." || s.Files["api.md"] == "" {
		t.Errorf("PatchSkill = %+v, %v", s, err)
	}
	if _, err := c.ReplaceEnvironment(ctx, &client.EnvironmentSpec{ID: "shop", StartURL: new("https://shop.example/")}); err != nil {
		t.Errorf("ReplaceEnvironment: %v", err)
	}
	if e, err := c.GetEnvironment(ctx, "shop"); err != nil || e.StartURL == nil || e.Headless != nil {
		t.Errorf("GetEnvironment after the replacement = %+v, %v", e, err)
	}
	if _, err := c.ReplaceAgent(ctx, &client.AgentSpec{Name: "reviewer", Description: "mine"}); err == nil {
		t.Error("replacing a configured agent succeeded")
	} else if ae, ok := errors.AsType[*client.APIError](err); !ok || ae.StatusCode != http.StatusForbidden {
		t.Errorf("replacing a configured agent: %v, want 403", err)
	}

	// A session of the registered agent uses its skill.
	res, err := c.RunSession(ctx, &client.SessionRequest{Agent: client.AgentRef{Name: "acme/support"}, Messages: client.Text("Where is 4242?")})
	if err != nil || res.Status != session.StatusCompleted || res.Answer != "shipped" {
		t.Errorf("RunSession = %+v, %v", res, err)
	}

	if _, err := c.ReplaceSkill(ctx, &client.SkillSpec{Name: "acme/lookup", Description: "d", Body: "b"}); err != nil {
		t.Errorf("ReplaceSkill: %v", err)
	}
	if s, err := c.GetSkill(ctx, "acme/lookup"); err != nil || s.Files != nil || s.Body != "b" {
		t.Errorf("GetSkill after the replacement = %+v, %v", s, err)
	}
	for _, del := range []func() error{
		func() error { return c.DeleteAgent(ctx, "acme/support") },
		func() error { return c.DeleteEnvironment(ctx, "shop") },
		func() error { return c.DeleteSkill(ctx, "acme/lookup") },
	} {
		if err := del(); err != nil {
			t.Errorf("delete: %v", err)
		}
		if err := del(); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("deleting twice: %v, want ErrNotFound", err)
		}
	}
	if _, err := c.GetAgent(ctx, "acme/support", false); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetAgent after delete: %v, want ErrNotFound", err)
	}
}
