// Package tools provides built-in tools for agents: reading, listing,
// searching, writing and editing files, running shell commands, fetching
// web pages, showing the model images and PDFs, and keeping a plan. Every tool is opt-in: each
// constructor returns a small [loop.Toolset] to join with the application's
// own tools.
//
//	files, err := tools.Files(".", nil) // read_file, list_files, write_file, edit_file
//	if err != nil {
//		return err
//	}
//	grep, err := tools.Grep(".", nil) // grep
//	if err != nil {
//		return err
//	}
//	shell, err := tools.Shell(".", nil) // run_command
//	if err != nil {
//		return err
//	}
//	media, err := tools.Media("data", nil) // upload_media
//	if err != nil {
//		return err
//	}
//	toolset, err := loop.Join(files, grep, shell, media, tools.Web(nil), tools.Todo()) // web_fetch, todo_write
//	if err != nil {
//		return err
//	}
//	agent := loop.NewAgent(model, toolset, &loop.Options{Approver: approver})
//
// A command line selects tools by name with [ByName]:
//
//	toolset, err := tools.ByName(strings.Split(*toolsFlag, ","), &tools.Config{Dir: "."})
//
// # Confinement
//
// The file tools and upload_media each work inside one directory, opened
// as an [os.Root]: paths are relative to it, absolute paths are accepted
// only inside it, and neither `..` nor a symbolic link can lead out of it.
// run_command runs with that directory as its working directory. Where the
// kernel can confine it (Linux with Landlock), each command runs through
// [sandbox.Run], or a [sandbox.Box] that keeps the sandbox's helper between
// commands: it may write only that directory, a home of that
// directory's own and a scratch directory (its TMPDIR), read little besides
// the system's directories, and see only its environment and its own
// processes; the network is allowed unless [ShellOptions.DenyNetwork],
// and [sandbox.DefaultLimits] apply. Elsewhere, or with
// [ShellOptions.Unconfined], a command can reach anything the process can,
// and the first result says so. It asks for approval either way.
//
// A program that is not a model (a server giving callers a session's
// files) gets the same confinement, by the same code, from [Workspace].
//
// # Search
//
// grep searches file contents by regular expression under the same
// confinement: the walk opens each directory through its parent inside
// the root and follows no symbolic link; .gitignore files and
// .git/info/exclude are honoured, binary files, FIFOs, devices and files
// with several hard links skipped, and every input and output bounded
// (see [GrepIn]). There is no separate glob tool: list_files takes a glob
// pattern.
//
// # The plan
//
// todo_write records the agent's plan as the arguments of its call, so
// the plan travels with the run's chunks and a session's events;
// [PlanOf] reads it from a chunk.
//
// # Approval
//
// Tools that change things (write_file, edit_file, run_command) set
// RequiresApproval, so each call waits for the agent's [loop.Approver];
// their options can turn that off. Read-only tools (read_file, list_files,
// grep, web_fetch, upload_media) and todo_write are Concurrent and need no
// approval.
//
// # Failures
//
// A tool never panics on bad input: a missing file, a refused path or URL,
// or a failing command reaches the model as a tool error it can read and
// act on. A command that exits with a non-zero code returns its output and
// exit code, marked as an error.
//
// # Media
//
// upload_media returns an image (PNG, JPEG, GIF, WebP) or a PDF as an
// [llm.ImagePart] or [llm.DocumentPart] in its output, after a text part
// naming the file, its type and size. The type is judged from the content,
// not the name; other types are refused, and sizes are capped (see
// [MediaOptions]). The Anthropic provider sends the attachment in the tool
// result. OpenAI Chat Completions cannot hold images or files in a tool
// message: the OpenAI provider either moves them to a user message or
// refuses the request with an error wrapping [llm.ErrUnsupported]; either
// way the attachment is not dropped silently.
//
// # Web fetches
//
// web_fetch refuses, by default, to connect to addresses that are not on
// the public internet (loopback, private, link-local, unspecified,
// multicast, reserved and cloud metadata addresses). The check runs at
// connect time, on the resolved address, so it covers redirects and DNS
// answers that change; see [WebOptions.AllowPrivate].
package tools
