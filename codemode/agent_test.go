package codemode_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/codemode"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// TestAgentEndToEnd drives a real loop with a scripted model: the model
// writes a program, run_code runs it against granted capabilities, and the
// model reads its output; a refused program comes back as a tool error the
// model can act on. The capabilities are not offered to the model as tools.
func TestAgentEndToEnd(t *testing.T) {
	list, get := count(listTool()), count(getTool())
	runner := newRunner(t, nil, list.def, get.def)
	model := llmtest.NewModel(
		llmtest.Call("c1", "run_code", `{"code":"x = get_item(nme='apple')"}`),
		llmtest.Call("c2", "run_code", `{"code":"w = 0\nfor n in list_items():\n    w += get_item(name=n)['weight']\nprint('weights', w)\nresult = w"}`),
		llmtest.Text("The items weigh 275 g."),
	)
	agent := loop.NewAgent(model, runner.Toolset(), nil)
	res, err := agent.Run(t.Context(), []llm.Message{llm.UserMessage("How much do the items weigh?")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "The items weigh 275 g." {
		t.Errorf("final = %q", res.Answer)
	}
	var results []llm.ToolResult
	for _, m := range res.Messages {
		for _, p := range m.Parts {
			if p.ToolResult != nil {
				results = append(results, *p.ToolResult)
			}
		}
	}
	want := []llm.ToolResult{{
		CallID: "c1", Name: "run_code", IsError: true,
		Content: []llm.Part{llm.TextPart("tool \"run_code\" failed: the program was not run:\n" +
			"1:5: get_item is missing required argument \"name\"; it takes name: string, unit?: string\n" +
			"1:14: get_item has no argument \"nme\"; it takes name: string, unit?: string")},
	}, {
		CallID: "c2", Name: "run_code",
		Content: []llm.Part{llm.TextPart("weights 275\nresult: 275")},
	}}
	if diff := cmp.Diff(want, results); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
	if list.calls.Load() != 1 || get.calls.Load() != 3 {
		t.Errorf("calls: list_items %d, get_item %d; want 1 and 3", list.calls.Load(), get.calls.Load())
	}
	reqs := model.Requests()
	var tools []string
	for _, s := range reqs[0].Tools {
		tools = append(tools, s.Name)
	}
	if diff := cmp.Diff([]string{"run_code"}, tools); diff != "" {
		t.Errorf("tools offered to the model (-want +got):\n%s", diff)
	}
}

// TestToolDescription: the model is told the capabilities and their
// arguments, since it does not see them as tools.
func TestToolDescription(t *testing.T) {
	r := newRunner(t, &codemode.Options{MaxSteps: 1000}, listTool(), getTool())
	want := "Runs a program written in Starlark, a small deterministic dialect of Python: def, for, while, if, " +
		"comprehensions, lambda, and built-ins such as len, range, sorted, enumerate, zip, min, max, str, int, float, " +
		"dict and list work (there is no sum: add in a loop); there are no imports, classes, exceptions (try) or recursion. " +
		"Use it to call several capabilities in one step, loop over their results and compute on them.\n\n" +
		"The program has no file, network or clock access except through these capabilities, called with keyword " +
		"arguments only. Each returns a dict or list (JSON results), or a str; a failing capability stops the program " +
		"with an error:\n" +
		"- list_items(prefix?: string): Lists item names.\n" +
		"- get_item(name: string, unit?: string): Gets an item by name.\n\n" +
		"What the program prints comes back, and so does the value assigned to the global variable `result` (as JSON). " +
		"The program is checked before it runs: an unknown name or wrong arguments to a capability are reported with " +
		"line:col and nothing runs. Limits: 1000 steps, 1m0s, 1048576 bytes of printed output."
	if diff := cmp.Diff(want, r.Tool().Description); diff != "" {
		t.Errorf("description (-want +got):\n%s", diff)
	}
}

// TestAgentCapabilityFailure: when a capability fails inside a program,
// the model reads the program's error (position, output), not the
// capability's own tool error, which the loop would find if it were in the
// chain of run_code's error.
func TestAgentCapabilityFailure(t *testing.T) {
	explode := funcTool("explode", func(context.Context) (string, error) { return "", errors.New("disk on fire") })
	runner := newRunner(t, nil, explode)
	model := llmtest.NewModel(
		llmtest.Call("c1", "run_code", `{"code":"print('before')\nexplode()"}`),
		llmtest.Text("It failed."),
	)
	res, err := loop.NewAgent(model, runner.Toolset(), nil).Run(t.Context(), []llm.Message{llm.UserMessage("go")})
	if err != nil {
		t.Fatal(err)
	}
	var got *llm.ToolResult
	for _, m := range res.Messages {
		for _, p := range m.Parts {
			if p.ToolResult != nil {
				got = p.ToolResult
			}
		}
	}
	want := "tool \"run_code\" failed: the program failed at 2:8: tool \"explode\" failed: disk on fire\nOutput before it stopped:\nbefore"
	if got == nil || !got.IsError || got.Text() != want {
		t.Errorf("result = %+v, want error %q", got, want)
	}
	if strings.Count(got.Text(), "disk on fire") != 1 {
		t.Errorf("the cause is repeated: %q", got.Text())
	}
}
