package browser_test

import (
	"context"
	"fmt"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// A browser for an agent: Chromium starts on the first tool call, and Close
// kills it and removes its temporary profile.
func ExampleBrowser_Tools() {
	b := browser.New(&browser.Options{StartURL: "https://example.com"})
	defer b.Close()
	var model llm.Model // a provider's model
	agent := loop.NewAgent(model, b.Tools(), nil)
	for c := range agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("What does example.com say?")}) {
		if c.Type == loop.ChunkEnd {
			fmt.Println(c.Result.Answer)
		}
	}
}

// The web environment entry of the sessions API, as hrns serve reads it.
func ExampleParseEnvironment() {
	env, err := browser.ParseEnvironment([]byte(`{"kind":"web","start_url":"https://example.com","mode":{"type":"visual","width":1024,"height":768}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	var o browser.Options
	env.Apply(&o)
	fmt.Println(o.StartURL, o.ViewportWidth, o.ViewportHeight, env.TextOnly())
	_, err = browser.ParseEnvironment([]byte(`{"kind":"web","mode":{"type":"audio"}}`))
	fmt.Println(err)
	// Output:
	// https://example.com 1024 768 false
	// the web environment: mode.type must be visual, multimodal or text, not "audio"
}
