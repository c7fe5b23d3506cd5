// Package mcp connects hrns to the Model Context Protocol, both ways: it
// mounts the tools of any MCP server as a [loop.Toolset], and it serves a
// [loop.Toolset] to any MCP client.
//
//	fs, err := mcp.Mount(ctx, &mcp.Spec{
//		Name:    "fs",
//		Command: "npx",
//		Args:    []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/data"},
//	})
//	if err != nil {
//		return err
//	}
//	defer fs.Close()
//	tools, err := loop.Join(builtin, fs.Toolset()) // fs__read_file, fs__write_file, ...
//
// It uses the official Go SDK, github.com/modelcontextprotocol/go-sdk.
//
// # Mounting a server
//
// [Mount] starts a server's command and talks to it over stdin and stdout,
// or reaches it over Streamable HTTP when the [Spec] has a URL; it lists
// the server's tools and wires each into a toolset under the server's name
// and two underscores ("fs__read_file"), so that servers combine with each
// other and with the built-in tools. [Spec.Prefix] and [Spec.NoPrefix]
// change that; a name that still clashes is refused by [loop.Join] with
// [loop.ErrDuplicateTool], as for any toolset. Each tool keeps the input
// schema the server declared.
//
// Results map to what the model reads: text as text; PNG, JPEG, GIF and
// WebP images as image parts the model can see; embedded resources as text,
// or as an image or PDF document by their MIME type; other binary content
// as a line of text saying what was left out; a result marked isError as a
// tool error; structured content as JSON text when the result has no text.
//
// # A server that dies
//
// A stdio server's process lives until [Mounted.Close]. If it exits while
// mounted, the call that notices it fails with a tool error that says so
// (with the exit status and the end of the server's stderr), and the call
// after that starts the server again. A Streamable HTTP server whose
// connection fails is reconnected the same way. A call that outlasts its
// timeout ([Spec.Timeout], or the agent's ToolTimeout) is cancelled on the
// server.
//
// # Changing tool lists
//
// A server may announce that its tools changed. The [Mounted] value then
// lists them again and replaces its toolset: [Mounted.Toolset] returns the
// current one, and the channel of [Mounted.Changed] is closed when it is
// replaced. An agent keeps the toolset it was built with for the whole of
// a run, so a caller picks up a change between runs: build the next agent
// from Toolset() again, for example when Changed() is closed.
//
// # Approval
//
// By default a mounted tool asks the agent's [loop.Approver] before each
// call unless the server marks it read-only (its readOnlyHint annotation);
// read-only tools also run in parallel. [Spec.Approval] changes the policy.
//
// # Serving hrns tools
//
// [NewServer] exposes a toolset to MCP clients, over stdio with
// [Server.Run] or over Streamable HTTP with [Server.Handler]. Each call runs
// through [loop.Toolset.Invoke], with the rules of an agent's run: it is
// validated against the tool's schema, run with the tool's timeout and its
// output bounded; its output maps back to MCP content, and a failure to an
// error result with the text a model would read. A tool that requires
// approval runs only if [ServerOptions.Approver] approves it, or with
// [ServerOptions.AskClient] if the MCP client's user does (for clients that
// support elicitation); with neither it is refused with an error result,
// never silently run.
//
// Each served tool is announced with MCP hints, so that a client asks its
// user only where hrns would: read-only (readOnlyHint) when it is
// Concurrent and does not require approval, destructive (destructiveHint)
// when it requires approval.
package mcp
