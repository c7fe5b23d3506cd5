package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// ExampleClient_RunSession runs a session whose agent calls a tool of the
// caller: the SDK runs it here and posts its result. The server is the
// real one, in process, with a scripted model.
func ExampleClient_RunSession() {
	// A server as hrns serve runs it.
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4242"}`)}},
		openaitest.Reply{Text: "Order 4242 has shipped."},
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

	// The caller.
	getOrderStatus := loop.NewTool("get_order_status", "Look up the status of an order in our system.",
		func(_ context.Context, in struct {
			OrderID string `json:"order_id"`
		}) (string, error) {
			fmt.Println("looking up order", in.OrderID)
			return "shipped", nil
		})
	c := client.New(srv.URL, "sk-example", nil)
	res, err := c.RunSession(context.Background(), &client.SessionRequest{
		Agent:    client.AgentRef{Inline: &client.Agent{Name: "support-agent", Description: "Answers order questions."}},
		Messages: client.Text("Check order 4242."),
	}, getOrderStatus)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Answer)
	// Output:
	// looking up order 4242
	// completed Order 4242 has shipped.
}
