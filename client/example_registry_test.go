package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// ExampleClient_CreateAgent registers a skill and an agent that uses it,
// then runs a session that names the agent: the agent loads the skill
// with the skill tools. The server is the real one, in process, with a
// scripted model.
func ExampleClient_CreateAgent() {
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "load_skill", `{"name":"acme/refunds"}`)}},
		openaitest.Reply{Text: "Refunds take 5 days."},
	)
	defer model.Close()
	dir, _ := os.MkdirTemp("", "hrns-example")
	defer os.RemoveAll(dir)
	st, _ := sqlite.Open(filepath.Join(dir, "hrns.db"), nil)
	defer st.Close()
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, nil)
	m.Start(context.Background())
	defer m.Stop(context.Background())
	h, _ := server.New(m, &server.Options{APIKeys: []string{"sk-example"}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	c := client.New(srv.URL, "sk-example", nil)
	if _, err := c.CreateSkill(ctx, &client.SkillSpec{
		Name: "acme/refunds", Description: "How refunds work.", Body: "Refunds take 5 days; read policy.md for exceptions.",
		Files: map[string]string{"policy.md": "Orders over 1000 EUR take 10 days."},
	}); err != nil {
		fmt.Println(err)
		return
	}
	agent, err := c.CreateAgent(ctx, &client.AgentSpec{
		Name: "acme/support", Description: "Answers customers.",
		Skills: []json.RawMessage{client.Ref("acme/refunds")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("registered", agent.Name)
	res, err := c.RunSession(ctx, &client.SessionRequest{Agent: client.AgentRef{Name: "acme/support"}, Messages: client.Text("How long do refunds take?")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Answer)
	// Output:
	// registered acme/support
	// completed Refunds take 5 days.
}
