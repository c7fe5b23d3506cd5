package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// A structured final answer: the schema comes from Out, the answer is
// validated, and an invalid one is sent back to the model with the reason.
func ExampleRunTyped() {
	type Capital struct {
		Country string `json:"country"`
		City    string `json:"city" jsonschema:"the capital city"`
	}
	model := llmtest.NewModel(
		llmtest.Text("The capital of France is Paris."), // not JSON: sent back
		llmtest.Text(`{"country":"France","city":"Paris"}`),
	)
	agent := loop.New(model, nil)
	capital, res, err := loop.RunTyped[Capital](context.Background(), agent, []llm.Message{
		llm.UserMessage("What is the capital of France?"),
	})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("%+v after %d turns\n", capital, len(res.Turns))
	fmt.Println(res.Messages[len(res.Messages)-2].Text())
	// Output:
	// {Country:France City:Paris} after 2 turns
	// Your final answer was rejected: the answer is not valid JSON: invalid character 'T' looking for beginning of value. Answer again with only a JSON value that matches the final_answer schema, and no other text.
}

// A raw schema in Options; an answer that never matches fails the run with
// an *OutputError holding the last answer.
func ExampleOutputSchema() {
	model := llmtest.NewModel(llmtest.Text(`{"score": 11}`), llmtest.Text(`{"score": 12}`))
	agent := loop.NewAgent(model, nil, &loop.Options{
		OutputSchema: &loop.OutputSchema{
			Name:   "rating",
			Schema: json.RawMessage(`{"type":"object","properties":{"score":{"type":"integer","maximum":10}},"required":["score"]}`),
		},
		MaxOutputRetries: 1,
	})
	_, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("Rate hrns from 0 to 10.")})
	var oe *loop.OutputError
	if errors.As(err, &oe) {
		fmt.Println("last answer:", oe.Answer)
		fmt.Println("attempts:", oe.Attempts)
	}
	// Output:
	// last answer: {"score": 12}
	// attempts: 2
}
