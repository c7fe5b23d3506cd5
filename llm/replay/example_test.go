package replay_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/llm/replay"
)

// Record the responses of a model once, then replay them without it. An
// agent would be given rec, then player, as its model; here the streams are
// read directly.
func Example() {
	dir, err := os.MkdirTemp("", "replay")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "session.jsonl")
	ctx := context.Background()
	req := &llm.Request{Messages: []llm.Message{llm.UserMessage("Say hello.")}}

	// Any llm.Model: a provider's client in real use.
	model := llmtest.NewModel(llmtest.Text("Hello."))
	rec, err := replay.Create(path, model, "scripted")
	if err != nil {
		log.Fatal(err)
	}
	for _, err := range rec.Stream(ctx, req) {
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		log.Fatal(err)
	}

	player, err := replay.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	for c, err := range player.Stream(ctx, req) {
		if err != nil {
			log.Fatal(err)
		}
		if c.Kind == llm.ChunkDone {
			fmt.Printf("%s answered %q\n", player.Model, c.Response.Message.Text())
		}
	}
	fmt.Println("responses left:", player.Remaining())
	// Output:
	// scripted answered "Hello."
	// responses left: 0
}
