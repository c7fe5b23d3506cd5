// Package desktop gives a model a computer: an X display it sees through
// screenshots and uses with the mouse and keyboard, through one tool,
// computer, whose actions are those of Anthropic's computer tool:
// screenshot, mouse_move, left_click, right_click, middle_click,
// double_click, triple_click, left_mouse_down, left_mouse_up,
// left_click_drag, scroll, type, key, hold_key, wait and cursor_position.
//
//	d, err := desktop.Start(ctx, &desktop.SandboxOptions{})  // a private display in the sandbox
//	if err != nil { ... }
//	defer d.Close()                                          // every process of it ends
//	agent := loop.NewAgent(model, d.Tools(), nil)
//
// Input goes through the X test extension (XTEST) with the distribution's
// xdotool, and screenshots are read from the display itself with xwd,
// decoded here, scaled down to the model's view (at most 1280×800 by
// default, [Options]) and encoded as PNG; the model's coordinates are
// scaled back onto the screen. Every action is bounded: in time (a stuck
// application times the action out and the screenshot is still taken, or
// its absence said), in text (at most [MaxText] characters typed at once,
// no control characters), in keys (named keys only: nothing reaches
// xdotool as an option), in image size.
//
// # Where the desktop is
//
// [Start] starts a private desktop in the sandbox (package sandbox): Xvfb,
// a window manager and the apps the operator lists (a terminal and the
// browser by default), with no network unless allowed, a root of the
// system's folders and the desktop's own, a /tmp and terminals of its own,
// its own PID namespace. The display has no socket in the host's file
// system and needs the cookie only the sandbox holds; an agent (this
// binary, re-executed in the sandbox) runs xdotool and xwd there for the
// host. [Desktop.Close] ends it all.
//
// [Open] uses a display this process reaches ($DISPLAY): the user's own
// desktop, where nothing confines what the model does.
//
// # Providers
//
// The tool is marked as a computer tool ([loop.ToolDef.Computer]):
// providers with a native computer tool render it as that, Anthropic as
// computer_20250124 with the view's size, OpenAI's Responses API as
// computer_use_preview (translating its calls into this tool's
// arguments); the others render it as a plain function tool.
package desktop
