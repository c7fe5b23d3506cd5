package desktop_test

import (
	"context"
	"fmt"

	"github.com/hrns-dev/hrns/desktop"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// A private desktop in the sandbox for an agent: a terminal and the
// browser on a 1280x800 screen; the model gets the computer tool.
func ExampleStart() {
	ctx := context.Background()
	d, err := desktop.Start(ctx, &desktop.SandboxOptions{})
	if err != nil {
		fmt.Println(err) // no Xvfb, xdotool or xwd, or no sandbox
		return
	}
	defer d.Close() // every process of the desktop ends

	var model llm.Model // a provider's client: Anthropic's renders Claude's computer tool
	agent := loop.NewAgent(model, d.Tools(), nil)
	_ = agent
}

// Acting on the desktop directly: a click, then what the screen shows.
func ExampleDesktop_Do() {
	ctx := context.Background()
	d, err := desktop.Start(ctx, &desktop.SandboxOptions{Apps: [][]string{{"xmessage", "Hello"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	w, h := d.View()
	a, err := desktop.ParseAction([]byte(`{"action":"left_click","coordinate":[10,10]}`), w, h)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := d.Do(ctx, a)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text, res.MIMEType, len(res.Image) > 0)
}
