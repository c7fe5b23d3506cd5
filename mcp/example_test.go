package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
	"github.com/hrns-dev/hrns/tools"
)

// Serve a tool over Streamable HTTP, then mount it back as a toolset: what
// any MCP client sees of hrns, and what hrns sees of any MCP server.
func Example() {
	ctx := context.Background()
	type greetArgs struct {
		Name string `json:"name" jsonschema:"who to greet"`
	}
	greet := loop.NewTool("greet", "Greets someone", func(_ context.Context, in greetArgs) (string, error) {
		return "Hello, " + in.Name + "!", nil
	})
	srv := mcp.NewServer(loop.MustToolset(greet), nil)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	m, err := mcp.Mount(ctx, &mcp.Spec{Name: "demo", URL: hs.URL})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fmt.Println(m.Toolset().Names())

	def, _ := m.Toolset().Lookup("demo__greet")
	out, err := def.Handler(ctx, &loop.Call{Arguments: json.RawMessage(`{"name":"Ada"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Content[0].Text)
	// Output:
	// [demo__greet]
	// Hello, Ada!
}

// Mount the reference filesystem server, started with npx, next to the
// agent's own tools.
func ExampleMount() {
	ctx := context.Background()
	fs, err := mcp.Mount(ctx, &mcp.Spec{
		Name:    "fs",
		Command: "npx",
		Args:    []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/data"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer fs.Close()

	var own *loop.Toolset // the application's tools
	tools, err := loop.Join(own, fs.Toolset())
	if err != nil {
		log.Fatal(err) // a name wired twice
	}
	agent := loop.NewAgent(llmtest.NewModel(), tools, nil)
	_ = agent
}

// Serve the built-in file tools to an MCP client over stdio, asking the
// client's user before calls of tools that require approval.
func ExampleServer_Run() {
	files, err := tools.Files(".", nil)
	if err != nil {
		log.Fatal(err)
	}
	srv := mcp.NewServer(files, &mcp.ServerOptions{AskClient: true})
	if err := srv.Run(context.Background(), &sdkmcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
