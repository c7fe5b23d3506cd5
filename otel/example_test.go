package otel_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/otel"
)

// An agent whose runs are traced: set the observer in the agent's options.
// Here the spans go to an in-memory exporter; a program would use an OTLP
// exporter and a batcher.
func ExampleNew() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	obs, err := otel.New(&otel.Options{TracerProvider: tp, Provider: "openai", AgentName: "support"})
	if err != nil {
		panic(err)
	}

	model := llmtest.NewModel(llmtest.Call("c1", "lookup", `{"order":"4242"}`), llmtest.Text("It shipped."))
	lookup := loop.NewTool("lookup", "Looks an order up.", func(_ context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "order " + in.Order + ": shipped", nil
	})
	agent := loop.New(model, nil, loop.WithToolsets(loop.MustToolset(lookup)),
		loop.WithOptions(&loop.Options{Model: "gpt-4.1", Observer: obs}))
	if _, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("Did order 4242 ship?")}); err != nil {
		panic(err)
	}
	for _, s := range spans.GetSpans() { // in the order they ended
		fmt.Println(s.Name)
	}
	// Output:
	// chat gpt-4.1
	// execute_tool lookup
	// chat gpt-4.1
	// invoke_agent support
}
