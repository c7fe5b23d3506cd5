// Package loop runs a model with tools until the job is done.
//
// The simple contract: a [Tool] has a description, flat arguments and a
// string-in, string-out Call; tools are wired by name into an agent, and the
// system prompt is the first message of the run.
//
//	tool := loop.NewSimpleTool(
//		"Looks up a project name",
//		[]loop.ToolArgument{{Name: "id", Type: "string"}},
//		func(args map[string]any) string {
//			id, _ := args["id"].(string)
//			return "project-" + id
//		},
//	)
//	agent := loop.New(client, map[string]loop.Tool{"lookup_project": tool})
//	for chunk := range agent.RunLoop(ctx, []llm.Message{
//		openai.SystemMessage("You are a helpful assistant."),
//		openai.UserMessage("What is project 42?"),
//	}) {
//		switch chunk.Type {
//		case loop.ChunkMessage: // a delta of the answer
//			fmt.Print(chunk.Content)
//		case loop.ChunkRetry: // the attempt failed: what it printed is void
//			fmt.Println("\n[retrying; the answer starts again]")
//		case loop.ChunkEnd: // always last; check the error of a failed run
//			if err := chunk.Result.Err; err != nil {
//				fmt.Println("\nerror:", err) // a refused API key, say
//			}
//		}
//	}
//
// # Typed tools and toolsets
//
// [NewTool] builds a tool from a Go function: its JSON Schema is inferred
// from the argument struct (descriptions, optional fields, enums, defaults,
// nested objects and arrays), arguments are validated before the function
// runs, and its result is returned to the model as text or JSON. A
// [ToolDef] literal takes a raw JSON Schema instead. Tools are wired into a
// [Toolset], which refuses a second tool of the same name and keeps the
// order tools were added in, so the tools offered to the model are stable.
// [NewAgent] takes a toolset and [Options]; [New] takes the same through
// [WithToolsets] and [WithOptions], next to its map of simple tools.
//
// # The run
//
// [Agent.RunLoop] returns an iterator of [Chunk]s: turn boundaries, text and
// reasoning deltas, tool-call argument deltas, retries, usage, and for each
// call tool_call_start followed by tool_call_result or tool_call_error. The
// last chunk is always [ChunkEnd] with the [Result]: the transcript, the
// final answer, the usage summed over the turns, and the error that ended a
// failed run.
//
// A tool never crashes a run: an unknown tool, arguments that are not JSON
// or do not match the schema, an error, a panic, a timeout or a refused
// approval all become a tool result the model reads, and a
// tool_call_error chunk. Only a fatal error ends a run: the context's, an
// error the provider will not recover from (such as a bad API key), or
// transient errors that outlast the retries.
//
// # Budgets, parallel calls and retries
//
// [Options] bound the turns, wall time and output tokens of a run; when a
// budget is spent the model is asked for a final answer without tools. Calls
// of one message to tools marked Concurrent run in parallel; results are
// always appended in call order. Failed model requests are retried with
// exponential backoff and jitter, honouring the provider's Retry-After.
//
// # Structured final answers
//
// [RunTyped] runs an agent whose final answer must be JSON matching the
// schema of a Go type, and returns it decoded; [Options.OutputSchema] does
// the same with a raw JSON Schema. The loop sends the schema with each
// request (providers render it natively), validates the answer, sends an
// invalid one back with the validation error a bounded number of times,
// then fails the run with an [*OutputError].
//
// # Context compaction
//
// With [Options.Compaction] set, a run whose transcript nears the model's
// context window is compacted before the next request, and a request the
// provider refuses as too long ([llm.ErrContextLength]) is compacted and
// sent again, once per turn. The strategies of package loop/compact trim
// old tool results to stubs or have the model summarise old turns, keeping
// the system prompt, the task, the latest turns, and each tool call with its
// result. A [ChunkCompaction] chunk reports each compaction; Result.Messages
// and Suspension.Messages hold the compacted transcript.
//
// # Sub-agents
//
// [AgentTool] offers an agent (its own model, tools and options) to another
// as a tool taking {"task": "..."}. The child's chunks reach the parent's
// consumer tagged with Chunk.Agent and Chunk.Depth, its answer is the call's
// result, its usage is added to the parent's; cancellation, approvals and
// budgets propagate, depth is bounded, and a child that suspends suspends
// the parent, whose [Agent.Resume] routes results to it.
//
// # Suspension, client-side tools and approvals
//
// A handler may return [ErrPending]: the run then stops with status
// [StatusSuspended] and a [Suspension], plain data that can be stored and
// given to [Agent.Resume] with the missing results, in this process or
// another. [NewClientTool] declares a tool that the caller runs this way. A
// tool marked RequiresApproval runs only once the agent's [Approver]
// approves it; the approver may also defer the decision, which suspends the
// call until a decision is given to Resume.
//
// # Observers
//
// [Options.Observer] watches runs: their start and end, each model request,
// tool call, retry and compaction (see [Observer]). Package
// github.com/hrns-dev/hrns/otel implements it with OpenTelemetry spans and
// metrics; the loop imports no telemetry library. Observers see names, IDs,
// counts, durations and errors, never message contents, and a suspension
// carries the trace context its resumption continues
// ([Suspension.TraceParent]).
//
// # Permissions and hooks
//
// Options.Permissions is a permission policy ([Permissions]): a mode
// (default, acceptEdits, plan, bypassPermissions) and allow and deny
// [Rule]s on tool names and on what calls act on (command prefixes, parsed
// as shell by the subject's [CommandParser]; path globs; URLs), which tools
// declare with ToolDef.Access and ToolDef.Subject. The loop links no shell
// parser: package github.com/hrns-dev/hrns/loop/cmdline has one, and a tool
// that runs command lines declares its subject with cmdline.Subject; a
// command subject without a parser fails closed ([ErrNoCommandParser]). Options.Hooks are functions called
// before and after tool calls, on the user's prompt, when the model would
// stop, before compaction and at the start and end of a run ([Hook]).
// Every call is decided in one order: pre_tool hooks, deny rules, the mode,
// allow rules, the approver; a refusal says which step made it.
//
// # Reading the source
//
// A turn is one function, run.runTurns in run.go, that calls one step per
// file, in order: instructions.go (the budgets, Options.BeforeTurn, the
// final-answer prompt), compact.go (compaction before the request),
// request.go (the request, from [Options]), send.go (the attempts, with
// retries and one compaction after a context length refusal) reading each
// attempt's stream with stream.go, answer.go (the message kept; one without
// calls judged as the answer: a final answer was asked for, the output
// schema of output.go, the stop hooks), then exec.go for the calls
// (permission in authorize.go, approval.go and permission.go; handlers;
// results), or suspend.go when calls wait (suspension, a yield between
// turns, and resumption). Hooks (hooks.go) and the observer (observe.go)
// are called from the steps; options.go holds Options and its defaults,
// grouped by the file that reads each field.
package loop
