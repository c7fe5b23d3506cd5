// Package tui is the interactive chat of the hrns command: a full-screen
// terminal program (Bubble Tea) that runs a [loop.Agent] turn by turn and
// shows its chunks as they come, as the --json and text renderers of
// "hrns run" do.
//
// It shows streamed answers rendered as Markdown, reasoning dimmed and
// folded, each tool call as one line that expands to its arguments and
// result, a spinner with the elapsed time while the model or a tool works,
// the session's token usage and cost (see [pricing.Table]), and asks approvals in
// place: the command, or a coloured diff against the current file for
// write_file and edit_file, answered y, n (with a reason), always for the
// tool, or always for the command's prefix (see [Allower]).
//
// Everything that comes from the model or a tool is untrusted: it is
// escaped with [safetext] before it reaches the screen, so that the only
// escape sequences written are the chat's own styling.
package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/hrns-dev/hrns/cmd/hrns/internal/callview"
	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/compact"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/tools"
)

// Config configures a chat.
type Config struct {
	Model     llm.Model
	ModelName string
	Tools     *loop.Toolset
	// System is the system prompt, sent first in every conversation.
	System string
	// Options are the agent's options. The chat sets Model, Approver and
	// ApprovalTimeout, and Compaction when Compaction is set.
	Options loop.Options
	// Compaction, when set, gives the automatic compaction of each run
	// for the model it runs (nil: none); it is asked at every run, so a
	// change of model changes the window.
	Compaction func(model string) *loop.Compaction
	// Workdir is where the file tools work: write and edit approvals diff
	// against the files there.
	Workdir string
	// Allow keeps the "always" answers; nil means a [SessionAllowList].
	Allow Allower
	// Prices price the session's usage; nil means [pricing.Default].
	Prices pricing.Table
	// Notices are lines shown when the chat opens (the instruction files
	// loaded, for instance). They are trusted: the caller escapes what
	// it did not write.
	Notices []string
	// Store keeps conversations; nil keeps none.
	Store *Store
	// Resume is a saved conversation to continue; nil starts a new one.
	Resume *Conversation
	// Input and Output are the terminal; nil means stdin and stdout.
	Input  io.Reader
	Output io.Writer
	// ListModels, when set, lists the provider's models for /model (it
	// is given a context with a deadline); KnownModels are shown when it
	// is not set or fails.
	ListModels  func(ctx context.Context) ([]string, error)
	KnownModels []string
	// Endpoint names the provider and its URL. A conversation resumed
	// from the same endpoint continues with the model it was switched to,
	// unless ModelFixed (the model was named on the command line).
	Endpoint   string
	ModelFixed bool
	// PickResume opens the picker of this directory's conversations when
	// the chat starts (hrns chat --resume without an ID).
	PickResume bool
	// WithLiveOutput, when set, returns a context in which running
	// commands send their output to f as it comes (tools.WithLiveOutput):
	// the chat shows the last lines under the command's line.
	WithLiveOutput func(ctx context.Context, f func(command string, p []byte)) context.Context
}

// Run runs the chat until the person leaves it or ctx is done.
func Run(ctx context.Context, cfg *Config) error {
	c := newChat(ctx, cfg)
	defer c.stop()
	in, out := cfg.Input, cfg.Output
	if in == nil {
		in = os.Stdin
	}
	if out == nil {
		out = os.Stdout
	}
	err := runProgram(ctx, c, in, out, nil)
	c.save()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return ctx.Err()
	}
	if c.conv != nil && len(c.conv.Messages) > 0 {
		fmt.Fprintf(out, "Conversation %s saved: hrns chat --resume %s\n", c.conv.ID, c.conv.ID)
	}
	return err
}

// blockKind says what a block of the transcript shows.
type blockKind int

const (
	blockUser blockKind = iota
	blockAnswer
	blockThinking
	blockTool
	blockNotice
	blockError
	blockApproval
)

// toolState is where a tool call is.
type toolState int

const (
	toolWriting toolState = iota
	toolAsking
	toolRunning
	toolDone
	toolFailed
	toolWaiting
)

// A block is one entry of the transcript on screen.
type block struct {
	kind  blockKind
	text  strings.Builder
	done  bool
	agent string // the sub-agent whose tool call this is

	// tool calls
	id, name string
	args     json.RawMessage
	result   string
	state    toolState
	start    time.Time
	dur      time.Duration

	// approvals: the preview's lines
	lines []string
	// running commands: the tail of their output so far
	live []byte

	// sub-agents: a call of a sub-agent (a task) has the call that runs
	// it as parent, and is folded into its line; the parent counts them
	// and names the last.
	parent    *block
	children  int
	lastChild string

	// cache of the rendered lines
	cacheKey renderKey
	cache    []string
}

// event messages travel from the run's goroutine (and other work done
// off the UI's) to Update, through chat.events.
type (
	chunkMsg struct {
		run   int
		chunk loop.Chunk
	}
	liveMsg struct {
		run     int
		command string
		data    []byte
	}
	compactedMsg struct {
		res *compact.Result
		err error
	}
	tickMsg time.Time
)

// chat is the Bubble Tea model of the chat.
type chat struct {
	cfg    *Config
	st     *styles
	life   context.Context
	cancel context.CancelFunc

	width, height int
	input         textarea.Model
	blocks        []*block
	scroll        int // lines scrolled up from the bottom

	msgs      []llm.Message // the conversation as the model sees it
	modelName string
	usage     map[string]llm.Usage // per model
	liveUsage llm.Usage            // of the running run, top level
	conv      *Conversation

	events  chan any
	runID   int
	busy    bool
	stopRun context.CancelFunc
	attempt int // index of the first block of the current attempt
	act     string
	actAt   time.Time
	queued  []string
	ctrlC   bool
	ticking bool

	approval    *pendingApproval
	reason      bool   // the input holds the reason of a refusal
	interrupted bool   // the person interrupted the run, and the chat said so
	lastRetry   string // the error of the last retry, said once

	perms     *loop.Permissions // the policy of every run; Shift+Tab changes its mode
	bypassOK  bool              // the chat started in bypassPermissions, which Shift+Tab may come back to
	menu      *menu             // the "/" menu, "@" completion or a picker, shown above the input
	dismissed string            // the input when Esc closed its menu: not shown again until it changes
	paths     []string          // the workdir's paths for "@", walked once per turn
	walking   bool              // the walk of paths goes on
	walk      int               // the number of the latest walk

	expandTools  bool
	showThinking bool

	history []string
	histPos int
	draft   string

	// typedAt is when a key last went into the input while a run was
	// busy (a message typed ahead): an approval that appears then does
	// not take the keys that follow as its answer (typeAheadGuard).
	typedAt time.Time

	now  func() time.Time
	tick func() tea.Cmd
}

type pendingApproval struct {
	msg    approvalMsg
	prev   *preview
	block  *block
	hidden int
	// guardUntil, set when the approval appeared while the person was
	// typing, is when its keys start to count as answers; each key
	// before it moves it on (see typeAheadGuard). warned says the person
	// was told.
	guardUntil time.Time
	warned     bool
}

// typeAheadGuard is how long keys typed on after an approval appeared
// mid-typing are not taken as its answer: a person typing a message
// while the agent works ("say yes and...") would otherwise answer a call
// they have not seen with its first letter that is an answer (y allows
// it, a allows the tool from now on). The guard lasts until the person
// has stopped typing this long.
const typeAheadGuard = time.Second

// placeholder is the input's hint when it is empty.
const placeholder = "Ask, or /help. Enter sends, Alt+Enter or Ctrl+J adds a line."

// previewLines and headLines keep the view-before-allow rule of hrns run:
// a preview longer than previewLines shows its first headLines, and the
// call can be allowed only once the person asked to see all of it.
const (
	previewLines = 40
	headLines    = 20
)

func newChat(ctx context.Context, cfg *Config) *chat {
	life, cancel := context.WithCancel(ctx)
	c := &chat{
		cfg: cfg, st: newStyles(), life: life, cancel: cancel,
		width: 80, height: 24,
		modelName: cfg.ModelName,
		usage:     map[string]llm.Usage{},
		events:    make(chan any, 64),
		now:       time.Now,
	}
	c.tick = func() tea.Cmd {
		return tea.Tick(100*time.Millisecond, func(t time.Time) tea.Msg { return tickMsg(t) })
	}
	if cfg.Allow == nil {
		cfg.Allow = &SessionAllowList{}
	}
	if cfg.Prices == nil {
		cfg.Prices = pricing.Default()
	}
	if cfg.Options.Permissions == nil {
		cfg.Options.Permissions = &loop.Permissions{}
	}
	c.perms = cfg.Options.Permissions
	c.bypassOK = c.perms.CurrentMode() == loop.ModeBypass
	ta := textarea.New()
	ta.ShowLineNumbers = false
	ta.SetPromptFunc(2, func(pi textarea.PromptInfo) string {
		if pi.LineNumber == 0 {
			return "› "
		}
		return "  "
	})
	ta.Placeholder = placeholder
	ta.SetHeight(3)
	ta.KeyMap.InsertNewline.SetKeys("ctrl+j", "alt+enter", "shift+enter")
	s := ta.Styles()
	s.Cursor.Blink = false
	s.Focused.CursorLine = lipgloss.NewStyle()
	ta.SetStyles(s)
	ta.Focus()
	c.input = ta
	for _, n := range cfg.Notices {
		c.notice(n)
	}
	if cfg.Resume != nil {
		c.load(cfg.Resume)
	} else {
		c.reset()
	}
	if cfg.PickResume {
		c.pickConversation()
	}
	return c
}

// reset starts a new conversation.
func (c *chat) reset() {
	c.msgs = nil
	if c.cfg.System != "" {
		c.msgs = append(c.msgs, llm.SystemMessage(c.cfg.System))
	}
	c.conv = nil
	if c.cfg.Store != nil {
		c.conv = c.cfg.Store.New(c.cfg.Workdir, c.modelName)
	}
}

// stop ends the run, if any, and the goroutines of the chat.
func (c *chat) stop() {
	if c.stopRun != nil {
		c.stopRun()
	}
	c.cancel()
}

func (c *chat) Init() tea.Cmd {
	return tea.Batch(c.input.Focus(), c.wait())
}

// wait reads the next event.
func (c *chat) wait() tea.Cmd {
	return func() tea.Msg {
		select {
		case e := <-c.events:
			return e
		case <-c.life.Done():
			return nil
		}
	}
}

// send delivers an event to Update, unless the chat or ctx is done.
func (c *chat) send(ctx context.Context, e any) bool {
	select {
	case c.events <- e:
		return true
	case <-ctx.Done():
		return false
	case <-c.life.Done():
		return false
	}
}

func (c *chat) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		c.width, c.height = max(msg.Width, 20), max(msg.Height, 8)
		c.input.SetWidth(c.width)
		return c, nil
	case tickMsg:
		if c.busy {
			return c, c.tick()
		}
		c.ticking = false
		return c, nil
	case chunkMsg:
		c.onChunk(msg)
		return c, tea.Batch(c.wait(), c.afterRun())
	case approvalMsg:
		c.ask(msg)
		return c, c.wait()
	case liveMsg:
		c.onLive(msg)
		return c, c.wait()
	case compactedMsg:
		c.onCompacted(msg)
		return c, c.wait()
	case modelsMsg:
		c.pickModel(msg.models, msg.err)
		return c, c.wait()
	case pathsMsg:
		c.onPaths(msg)
		return c, c.wait()
	case tea.PasteMsg:
		if c.menu != nil && c.menu.kind == menuPick {
			return c, nil
		}
		if c.approval == nil || c.reason {
			var cmd tea.Cmd
			c.input, cmd = c.input.Update(msg)
			c.refreshCompletion()
			return c, cmd
		}
		return c, nil
	case tea.KeyPressMsg:
		return c.onKey(msg)
	}
	var cmd tea.Cmd
	c.input, cmd = c.input.Update(msg)
	return c, cmd
}

// afterRun starts the next queued message once a run has ended.
func (c *chat) afterRun() tea.Cmd {
	if c.busy || len(c.queued) == 0 {
		return nil
	}
	text := c.queued[0]
	c.queued = c.queued[1:]
	return c.submit(text)
}

func (c *chat) onKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	key := k.String()
	if key != "ctrl+c" {
		c.ctrlC = false
	}
	switch key {
	case "ctrl+c":
		if c.ctrlC {
			c.cancelRun()
			return c, tea.Quit
		}
		c.ctrlC = true
		if c.busy {
			c.interrupt("turn interrupted: press Ctrl-C again to exit")
		} else {
			c.input.Reset()
			c.notice("Press Ctrl-C again to exit (or type /exit).")
		}
		return c, nil
	}
	if key == "shift+tab" {
		c.cycleMode()
		return c, nil
	}
	if c.menu != nil {
		if done, cmd := c.menuKey(key, k); done {
			return c, cmd
		}
	}
	switch key {
	case "esc":
		if c.busy {
			c.interrupt("turn interrupted")
		}
		return c, nil
	case "pgup":
		c.scroll += max(1, c.viewHeight()-2)
		return c, nil
	case "pgdown":
		c.scroll = max(0, c.scroll-max(1, c.viewHeight()-2))
		return c, nil
	case "ctrl+o":
		c.expandTools = !c.expandTools
		return c, nil
	case "ctrl+t":
		c.showThinking = !c.showThinking
		return c, nil
	}
	if c.approval != nil && !c.reason {
		c.answer(key)
		return c, nil
	}
	switch key {
	case "enter":
		text := strings.TrimSpace(c.input.Value())
		c.input.Reset()
		if c.reason {
			c.reason = false
			if text == "" {
				text = "the user said no"
			}
			c.decide(loop.Decision{Verdict: loop.Reject, Reason: text}, "refused: "+text)
			return c, nil
		}
		if text == "" {
			return c, nil
		}
		c.remember(text)
		if c.busy {
			c.queued = append(c.queued, text)
			c.notice("(queued: sent when this turn ends; Esc interrupts it)")
			return c, nil
		}
		return c, c.submit(text)
	case "up":
		if c.input.Line() == 0 && len(c.history) > 0 && c.histPos > 0 {
			if c.histPos == len(c.history) {
				c.draft = c.input.Value()
			}
			c.histPos--
			c.input.SetValue(c.history[c.histPos])
			return c, nil
		}
	case "down":
		if c.input.Line() == c.input.LineCount()-1 && c.histPos < len(c.history) {
			c.histPos++
			if c.histPos == len(c.history) {
				c.input.SetValue(c.draft)
			} else {
				c.input.SetValue(c.history[c.histPos])
			}
			return c, nil
		}
	}
	if c.busy {
		c.typedAt = c.now()
	}
	var cmd tea.Cmd
	c.input, cmd = c.input.Update(k)
	c.refreshCompletion()
	return c, cmd
}

// remember adds text to the input's history.
func (c *chat) remember(text string) {
	if n := len(c.history); n == 0 || c.history[n-1] != text {
		c.history = append(c.history, text)
	}
	c.histPos = len(c.history)
	c.draft = ""
}

// submit handles what the person typed: a slash command or a message.
func (c *chat) submit(text string) tea.Cmd {
	c.scroll = 0
	if strings.HasPrefix(text, "/") {
		return c.command(text)
	}
	b := &block{kind: blockUser, done: true}
	b.text.WriteString(text)
	c.blocks = append(c.blocks, b)
	c.msgs = append(c.msgs, llm.UserMessage(text))
	return c.startRun()
}

// startRun runs the agent on the conversation.
func (c *chat) startRun() tea.Cmd {
	c.runID++
	c.interrupted = false
	c.lastRetry = ""
	id := c.runID
	ctx, cancel := context.WithCancel(c.life)
	c.stopRun = cancel
	c.busy = true
	c.liveUsage = llm.Usage{}
	c.setAct("waiting for the model")
	opts := c.cfg.Options
	opts.Model = c.modelName
	opts.Approver = &approver{allow: c.cfg.Allow, send: c.send}
	if c.cfg.Compaction != nil {
		opts.Compaction = c.cfg.Compaction(c.modelName)
	}
	if opts.ApprovalTimeout == 0 {
		opts.ApprovalTimeout = 30 * time.Minute // a person at a terminal
	}
	agent := loop.NewAgent(c.cfg.Model, c.cfg.Tools, &opts)
	msgs := slices.Clone(c.msgs)
	if c.cfg.WithLiveOutput != nil {
		ctx = c.cfg.WithLiveOutput(ctx, func(command string, p []byte) {
			c.send(ctx, liveMsg{run: id, command: command, data: slices.Clone(p)})
		})
	}
	go func() {
		defer cancel()
		for chunk := range agent.RunLoop(ctx, msgs) {
			if !c.send(c.life, chunkMsg{run: id, chunk: chunk}) {
				return
			}
		}
	}()
	return c.startTicking()
}

func (c *chat) startTicking() tea.Cmd {
	if c.ticking || c.tick == nil {
		return nil
	}
	c.ticking = true
	return c.tick()
}

func (c *chat) cancelRun() {
	if c.stopRun != nil {
		c.stopRun()
	}
}

func (c *chat) setAct(s string) {
	if s != c.act {
		c.act, c.actAt = s, c.now()
	}
}

// notice adds a line of the chat's own to the transcript.
func (c *chat) notice(s string) {
	b := &block{kind: blockNotice, done: true}
	b.text.WriteString(s)
	c.blocks = append(c.blocks, b)
}

// errorNotice adds an error, escaped: it can quote a provider or a tool.
func (c *chat) errorNotice(s string) {
	b := &block{kind: blockError, done: true}
	b.text.WriteString(s)
	c.blocks = append(c.blocks, b)
}

// open returns the last block if it is an unfinished one of kind; else a
// new one.
func (c *chat) open(kind blockKind, agent string) *block {
	if n := len(c.blocks); n > c.attempt && n > 0 {
		if b := c.blocks[n-1]; b.kind == kind && !b.done && b.agent == agent {
			return b
		}
	}
	c.closeText()
	b := &block{kind: kind, agent: agent}
	c.blocks = append(c.blocks, b)
	return b
}

// closeText finishes the open answer and thinking blocks.
func (c *chat) closeText() {
	for _, b := range c.blocks[c.attempt:] {
		if b.kind == blockAnswer || b.kind == blockThinking {
			if !b.done {
				b.done = true
				b.cache = nil
			}
		}
	}
}

// tool returns the block of a call, made if needed.
func (c *chat) tool(info *loop.ToolCallInfo, agent string) *block {
	if info == nil {
		return &block{kind: blockTool}
	}
	for i := len(c.blocks) - 1; i >= 0; i-- {
		if b := c.blocks[i]; b.kind == blockTool && b.id == info.ID && b.agent == agent {
			return b
		}
	}
	c.closeText()
	b := &block{kind: blockTool, id: info.ID, name: info.Name, agent: agent}
	if agent != "" {
		// The call of the sub-agent that runs it: the latest running
		// call of that name.
		for i := len(c.blocks) - 1; i >= 0; i-- {
			if p := c.blocks[i]; p.kind == blockTool && p.agent == "" && p.name == agent && p.state == toolRunning {
				b.parent = p
				p.children++
				break
			}
		}
	}
	c.blocks = append(c.blocks, b)
	return b
}

func (c *chat) onChunk(m chunkMsg) {
	if m.run != c.runID {
		return
	}
	ch := m.chunk
	sub := ch.Agent != ""
	switch ch.Type {
	case loop.ChunkTurnStart:
		if !sub {
			c.attempt = len(c.blocks)
			c.setAct("waiting for the model")
		}
	case loop.ChunkReasoning:
		if sub {
			return
		}
		b := c.open(blockThinking, "")
		b.text.WriteString(ch.Content)
		b.cache = nil
		c.setAct("thinking")
	case loop.ChunkMessage:
		if sub {
			return
		}
		b := c.open(blockAnswer, "")
		b.text.WriteString(ch.Content)
		b.cache = nil
		c.setAct("writing")
	case loop.ChunkToolCallDelta:
		b := c.tool(ch.ToolCall, ch.Agent)
		b.text.WriteString(ch.Content)
		if !sub {
			c.setAct("writing a call of " + safetext.Escape(b.name))
		}
	case loop.ChunkRetry:
		if sub {
			return
		}
		// The attempt's text is void: the next one starts again.
		c.blocks = c.blocks[:c.attempt]
		msg := fmt.Sprint(ch.Err)
		c.errorNotice(callview.RetryLine(ch.Retry.Delay.Round(time.Millisecond).String(), ch.Retry.Attempt, msg, c.lastRetry))
		c.lastRetry = msg
		c.attempt = len(c.blocks)
	case loop.ChunkTurnEnd:
		c.closeText()
		if !sub && ch.Usage != nil {
			c.addUsage(*ch.Usage)
		}
	case loop.ChunkCompaction:
		if info := ch.Compaction; info != nil && !sub {
			c.notice(compactionNotice(info))
		}
	case loop.ChunkAnswerRejected:
		if !sub {
			c.errorNotice(fmt.Sprintf("the answer does not match the output schema: %v", ch.Err))
		}
	case loop.ChunkApprovalRequest:
		b := c.tool(ch.ToolCall, ch.Agent)
		b.state = toolAsking
		if ch.ToolCall != nil {
			b.args = ch.ToolCall.Arguments
		}
	case loop.ChunkToolCallStart:
		b := c.tool(ch.ToolCall, ch.Agent)
		if b.state == toolAsking {
			// Its line goes after the approval that let it run.
			if i := slices.Index(c.blocks, b); i >= 0 {
				c.blocks = append(slices.Delete(c.blocks, i, i+1), b)
			}
		}
		b.state, b.start = toolRunning, c.now()
		b.args = ch.ToolCall.Arguments
		b.cache = nil
		if b.parent != nil {
			b.parent.lastChild = safetext.Escape(b.name) + " " + argSummary(b.name, b.args)
		}
		c.setAct("running " + safetext.Escape(b.name))
	case loop.ChunkToolCallResult, loop.ChunkToolCallError:
		b := c.tool(ch.ToolCall, ch.Agent)
		if b.state == toolAsking {
			// Refused: its line goes after the approval, and says so.
			if i := slices.Index(c.blocks, b); i >= 0 {
				c.blocks = append(slices.Delete(c.blocks, i, i+1), b)
			}
		}
		b.state = toolDone
		if ch.Type == loop.ChunkToolCallError {
			b.state = toolFailed
		}
		b.result = ch.Content
		if ch.Type == loop.ChunkToolCallError && c.interrupted && b.state == toolFailed {
			// The interruption is said once, by the chat's line.
			b.result = "stopped"
		}
		if ch.ToolCall != nil {
			b.dur = ch.ToolCall.Duration
			if len(b.args) == 0 {
				b.args = ch.ToolCall.Arguments
			}
		}
		b.cache = nil
		c.setAct("waiting for the model")
	case loop.ChunkToolCallPending:
		b := c.tool(ch.ToolCall, ch.Agent)
		b.state = toolWaiting
		b.cache = nil
	case loop.ChunkError:
		if sub {
			return
		}
		if errors.Is(ch.Err, context.Canceled) || errors.Is(ch.Err, loop.ErrCancelled) {
			if !c.interrupted {
				c.errorNotice("turn interrupted")
			}
		} else {
			c.errorNotice(fmt.Sprint(ch.Err))
		}
	case loop.ChunkEnd:
		if sub {
			return
		}
		c.closeText()
		c.endRun(ch.Result)
	}
}

// maxLive bounds the output kept of a running command, for its last lines.
const maxLive = 8 << 10

// onLive adds output to the running command it comes from.
func (c *chat) onLive(m liveMsg) {
	if m.run != c.runID {
		return
	}
	for i := len(c.blocks) - 1; i >= 0; i-- {
		b := c.blocks[i]
		if b.kind != blockTool || b.state != toolRunning {
			continue
		}
		if cmd, ok := commandOf(b.args); ok && cmd == m.command {
			b.live = append(b.live, m.data...)
			if len(b.live) > maxLive {
				b.live = slices.Clone(b.live[len(b.live)-maxLive:])
			}
			return
		}
	}
}

// addUsage counts a turn's usage toward the current model.
func (c *chat) addUsage(u llm.Usage) {
	c.liveUsage.Add(u)
	t := c.usage[c.modelName]
	t.Add(u)
	c.usage[c.modelName] = t
}

// endRun takes the transcript of a finished run.
func (c *chat) endRun(res *loop.Result) {
	c.busy = false
	c.stopRun = nil
	c.act = ""
	c.paths, c.walking = nil, false // the turn may have made files: walk again
	c.walk++                        // and a walk going on is stale
	c.refuseApproval(loop.Decision{Verdict: loop.Cancel})
	if res == nil {
		return
	}
	// Usage of sub-agents reaches the result only.
	extra := res.Usage
	extra.InputTokens -= c.liveUsage.InputTokens
	extra.OutputTokens -= c.liveUsage.OutputTokens
	extra.CacheReadTokens -= c.liveUsage.CacheReadTokens
	extra.CacheWriteTokens -= c.liveUsage.CacheWriteTokens
	extra.ReasoningTokens -= c.liveUsage.ReasoningTokens
	if extra.InputTokens > 0 || extra.OutputTokens > 0 {
		c.addUsage(extra)
	}
	if res.Messages != nil {
		c.msgs = closeCalls(res.Messages)
	}
	for _, b := range c.blocks {
		if b.kind == blockTool && b.state < toolDone {
			b.state, b.result, b.cache = toolFailed, "not run: the turn ended", nil
		}
	}
	if res.Budget != "" {
		c.notice(fmt.Sprintf("(the %s budget was spent: the answer was asked for early)", res.Budget))
	}
	c.save()
}

// closeCalls makes a transcript that a cancelled run left with calls
// without results valid to send again: each such call gets an error
// result saying it was not run.
func closeCalls(msgs []llm.Message) []llm.Message {
	if len(msgs) == 0 {
		return msgs
	}
	last := msgs[len(msgs)-1]
	calls := last.ToolCalls()
	if last.Role != llm.RoleAssistant || len(calls) == 0 {
		return msgs
	}
	tm := llm.Message{Role: llm.RoleTool}
	for _, call := range calls {
		tm.Parts = append(tm.Parts, llm.Part{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{
			CallID: call.ID, Name: call.Name, IsError: true,
			Content: []llm.Part{llm.TextPart("not run: the user interrupted the turn")},
		}})
	}
	return append(slices.Clone(msgs), tm)
}

// ask shows an approval.
func (c *chat) ask(m approvalMsg) {
	c.closeText()
	if c.menu != nil {
		if c.menu.kind == menuPick {
			c.notice("(the picker is closed: a call waits for your answer)")
		}
		c.menu = nil
	}
	p := describe(m.req, c.cfg.Workdir, c.st, c.width)
	b := &block{kind: blockApproval, done: true}
	a := &pendingApproval{msg: m, prev: p, block: b}
	if now := c.now(); !c.typedAt.IsZero() && now.Sub(c.typedAt) < typeAheadGuard {
		a.guardUntil = now.Add(typeAheadGuard)
	}
	if len(p.lines) > previewLines {
		a.hidden = len(p.lines) - headLines
		b.lines = append(slices.Clone(p.lines[:headLines]),
			c.st.warn.Render(fmt.Sprintf("… %d more lines are not shown (%d in all): press v to see them all before allowing", a.hidden, len(p.lines))))
	} else {
		b.lines = p.lines
	}
	title := p.title
	if m.agent != "" {
		// A sub-agent's call says whose it is.
		title = "the sub-agent " + safetext.Escape(m.agent) + ": " + title
	}
	b.text.WriteString(title)
	if len(p.lookAlikes) > 0 {
		warn := []string{c.st.warn.Render("⚠ look-alike letters: these words mix Latin letters with letters of another script that draw the same, as a disguised address does:")}
		for _, l := range p.lookAlikes {
			warn = append(warn, c.st.warn.Render("  "+l))
		}
		b.lines = append(warn, b.lines...)
	}
	if p.escaped > 0 {
		b.lines = append([]string{c.st.warn.Render(fmt.Sprintf("⚠ %d characters that are invisible or that a terminal would interpret are shown escaped", p.escaped))}, b.lines...)
	}
	c.blocks = append(c.blocks, b)
	c.approval = a
	c.scroll = 0
	c.setAct("waiting for your answer")
}

// answer handles a key while an approval waits.
func (c *chat) answer(key string) {
	a := c.approval
	if now := c.now(); now.Before(a.guardUntil) {
		// Typed on from a message, not an answer.
		a.guardUntil = now.Add(typeAheadGuard)
		if !a.warned {
			a.warned = true
			c.notice("(this call came while you were typing: your keys are not taken as its answer until you stop typing for a second; read it, then answer)")
		}
		return
	}
	name := a.msg.req.Call.Name
	switch key {
	case "y":
		if a.hidden > 0 {
			c.notice(fmt.Sprintf("%d lines are not shown yet: press v to see them before allowing the call, or n to refuse it", a.hidden))
			return
		}
		c.decide(loop.Decision{Verdict: loop.Approve}, "allowed")
	case "a":
		if a.hidden > 0 {
			c.notice("press v to see the whole call first")
			return
		}
		if err := c.cfg.Allow.AlwaysAllow(name, ""); err != nil {
			c.errorNotice(fmt.Sprintf("could not record the answer: %v", err))
		}
		c.decide(loop.Decision{Verdict: loop.Approve}, "allowed, and "+safetext.Escape(name)+" is allowed from now on")
	case "p":
		if a.prev.prefix == "" {
			return
		}
		if a.hidden > 0 {
			c.notice("press v to see the whole call first")
			return
		}
		if err := c.cfg.Allow.AlwaysAllow(name, a.prev.prefix); err != nil {
			c.errorNotice(fmt.Sprintf("could not record the answer: %v", err))
		}
		c.decide(loop.Decision{Verdict: loop.Approve}, "allowed, and commands starting with “"+a.prev.prefix+"” are allowed from now on")
	case "A", "shift+a", "P", "shift+p":
		rem, ok := c.cfg.Allow.(Rememberer)
		prefix := ""
		if key == "P" || key == "shift+p" {
			if prefix = a.prev.prefix; prefix == "" {
				return
			}
		}
		if !ok {
			return
		}
		if a.hidden > 0 {
			c.notice("press v to see the whole call first")
			return
		}
		what := safetext.Escape(name) + " is allowed"
		if prefix != "" {
			what = "commands starting with “" + prefix + "” are allowed"
		}
		if err := c.cfg.Allow.AlwaysAllow(name, prefix); err != nil {
			c.errorNotice(fmt.Sprintf("could not record the answer: %v", err))
		}
		if err := rem.Remember(name, prefix); err != nil {
			c.errorNotice(fmt.Sprintf("could not remember the answer for this project: %v", err))
			c.decide(loop.Decision{Verdict: loop.Approve}, "allowed, and "+what+" in this chat")
			return
		}
		c.decide(loop.Decision{Verdict: loop.Approve}, "allowed, and "+what+" in this project from now on")
	case "v":
		if a.hidden > 0 {
			a.block.lines = a.prev.lines
			a.block.cache = nil
			a.hidden = 0
		}
	case "n":
		c.reason = true
		c.input.Reset()
		c.input.Placeholder = "Why not? (Enter sends; empty says only no)"
	}
}

// decide answers the waiting approval.
func (c *chat) decide(d loop.Decision, what string) {
	a := c.approval
	if a == nil {
		return
	}
	c.approval, c.reason = nil, false
	c.input.Placeholder = placeholder
	a.msg.reply <- d
	if d.Verdict != loop.Reject {
		// A refusal is said once, by the call's line after the
		// approval (the reason the model reads).
		c.notice("  → " + what)
	}
	c.setAct("waiting for the tool")
}

// interrupt stops the run on the person's word (Esc, Ctrl-C), cancelling
// the approval it waits for, if any, and says so in one line: the run's
// cancellation error is not shown again.
func (c *chat) interrupt(line string) {
	if a := c.approval; a != nil {
		c.approval, c.reason = nil, false
		c.input.Placeholder = placeholder
		a.msg.reply <- loop.Decision{Verdict: loop.Cancel, Reason: "the user interrupted the turn"}
	}
	c.cancelRun()
	c.errorNotice(line)
	c.interrupted = true
}

// refuseApproval answers a waiting approval, if any, with d.
func (c *chat) refuseApproval(d loop.Decision) {
	if c.approval != nil {
		c.decide(d, "refused")
	}
}

// compactionNotice is the chat's line for an automatic compaction: from
// what to what, and why.
func compactionNotice(info *loop.CompactionInfo) string {
	window := ""
	if info.Window > 0 {
		window = " of a " + formatTokens(int64(info.Window)) + " window"
	}
	why := "before the next request"
	if info.Reason == "context_length" {
		why = "the provider refused the request as too long; sent again"
	}
	return fmt.Sprintf("(context compacted by %s: %d → %d messages, about %s → %s tokens%s; %s)", info.Strategy,
		info.MessagesBefore, info.MessagesAfter, formatTokens(int64(info.TokensBefore)), formatTokens(int64(info.TokensAfter)), window, why)
}

// compactNow compacts the conversation with the library's default
// strategy (see /compact).
func (c *chat) compactNow() tea.Cmd {
	msgs := slices.Clone(c.msgs)
	model, name := c.cfg.Model, c.modelName
	c.busy = true
	c.setAct("compacting")
	go func() {
		res, err := compact.Default().Compact(c.life, &compact.Request{
			Messages: msgs, Target: compact.Estimate(msgs) / 2, Model: model, ModelName: name,
		})
		c.send(c.life, compactedMsg{res: res, err: err})
	}()
	return c.startTicking()
}

func (c *chat) onCompacted(m compactedMsg) {
	c.busy, c.act = false, ""
	if m.err != nil {
		c.errorNotice(fmt.Sprintf("compaction failed: %v", m.err))
		return
	}
	before, after := len(c.msgs), len(m.res.Messages)
	tb, ta := compact.Estimate(c.msgs), compact.Estimate(m.res.Messages)
	if m.res.Strategy == "" {
		c.notice("(nothing to compact yet)")
		return
	}
	c.msgs = m.res.Messages
	c.addUsage(m.res.Usage)
	c.notice(fmt.Sprintf("(compacted by %s: %d → %d messages, about %s → %s tokens)", m.res.Strategy, before, after, formatTokens(int64(tb)), formatTokens(int64(ta))))
	c.save()
}

// cost says what the session cost so far.
func (c *chat) cost() (total float64, unknown []string) {
	for model, u := range c.usage {
		p, ok := c.cfg.Prices.Lookup(model)
		if !ok {
			if u.InputTokens+u.OutputTokens > 0 {
				unknown = append(unknown, model)
			}
			continue
		}
		total += p.Cost(pricing.Usage(u)).Total
	}
	slices.Sort(unknown)
	return total, unknown
}

func (c *chat) totalUsage() llm.Usage {
	var t llm.Usage
	for _, u := range c.usage {
		t.Add(u)
	}
	return t
}

// ---- view ----

func (c *chat) View() tea.View {
	v := tea.NewView(c.screen())
	v.AltScreen = true
	v.WindowTitle = "hrns"
	return v
}

func (c *chat) viewHeight() int {
	return max(1, c.height-c.bottomHeight())
}

func (c *chat) bottomHeight() int {
	if c.approval != nil && !c.reason {
		return 1 + strings.Count(c.question(), "\n") + 1 // status, rule, question
	}
	return c.input.Height() + 2 + len(c.menuLines())
}

// screen renders the whole screen.
func (c *chat) screen() string {
	lines := c.transcript()
	h := c.viewHeight()
	c.scroll = min(c.scroll, max(0, len(lines)-h))
	end := len(lines) - c.scroll
	start := max(0, end-h)
	shown := lines[start:end]
	var b strings.Builder
	for i := 0; i < h-len(shown); i++ {
		b.WriteByte('\n')
	}
	for _, l := range shown {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if c.approval == nil || c.reason {
		for _, l := range c.menuLines() {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	b.WriteString(c.status())
	b.WriteByte('\n')
	if c.approval != nil && !c.reason {
		b.WriteString(c.question())
	} else {
		b.WriteString(c.st.rule.Render(strings.Repeat("─", c.width)))
		b.WriteByte('\n')
		b.WriteString(c.input.View())
	}
	return b.String()
}

// status is the line above the input: the permission mode, what is
// going on, usage, cost.
func (c *chat) status() string {
	mode := c.perms.CurrentMode()
	left := c.st.mode(mode).Render("⏵ "+string(mode)) + " "
	if c.busy {
		el := c.now().Sub(c.actAt).Truncate(time.Second)
		frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
		f := frames[int(c.now().UnixMilli()/100)%len(frames)]
		left += c.st.accent.Render(f) + " " + c.act + " " + c.st.dim.Render(fmt.Sprintf("%ds · Esc interrupts", int(el.Seconds())))
	} else if c.scroll > 0 {
		left += c.st.dim.Render(fmt.Sprintf("scrolled up %d lines · PgDn goes back", c.scroll))
	} else {
		left += c.st.dim.Render("(Shift+Tab cycles)")
	}
	u := c.totalUsage()
	right := formatTokens(u.InputTokens) + " in"
	if u.CacheReadTokens > 0 {
		right += " (" + formatTokens(u.CacheReadTokens) + " cached)"
	}
	right += " · " + formatTokens(u.OutputTokens) + " out · "
	total, unknown := c.cost()
	switch {
	case len(unknown) > 0 && total == 0:
		right += "unknown price"
	case len(unknown) > 0:
		right += pricing.Format(total) + "+unknown"
	default:
		right += pricing.Format(total)
	}
	right += " · " + safetext.Escape(c.modelName)
	right = c.st.dim.Render(right)
	gap := c.width - lipgloss.Width(left) - lipgloss.Width(right)
	if gap < 1 {
		// The activity gives way first: usage, cost and model stay.
		if room := c.width - lipgloss.Width(right) - 1; room >= 20 {
			return ansi.Truncate(left, room, "…") + " " + right
		}
		return ansi.Truncate(left+" "+right, c.width, "…")
	}
	return left + strings.Repeat(" ", gap) + right
}

// question is the bottom of the screen while an approval waits.
func (c *chat) question() string {
	a := c.approval
	name := safetext.Escape(a.msg.req.Call.Name)
	var opts []string
	if a.hidden > 0 {
		opts = append(opts, "v view all")
	} else {
		opts = append(opts, "y yes", "a always "+name)
		if a.prev.prefix != "" {
			opts = append(opts, "p always “"+a.prev.prefix+" …”")
		}
		if _, ok := c.cfg.Allow.(Rememberer); ok {
			opts = append(opts, "A/P also in this project")
		}
	}
	opts = append(opts, "n no (say why)", "Esc stop the turn")
	q := c.st.accent.Render("Allow "+name+"? ") + strings.Join(opts, " · ")
	return c.st.rule.Render(strings.Repeat("─", c.width)) + "\n" + ansi.Wrap(q, c.width, "")
}

// transcript renders every block.
func (c *chat) transcript() []string {
	var out []string
	var prev *block
	for _, b := range c.blocks {
		lines := c.render(b)
		if len(lines) == 0 {
			continue
		}
		if prev != nil && !(b.kind == blockNotice && prev.kind == blockApproval) {
			out = append(out, "")
		}
		out = append(out, lines...)
		prev = b
	}
	return out
}

// renderKey is what a block's rendered lines depend on, but for a tool
// call's, which are rendered each time.
type renderKey struct {
	width                     int
	expandTools, showThinking bool
	done                      bool
	state                     toolState
	textLen, lines            int
}

func (c *chat) render(b *block) []string {
	key := renderKey{c.width, c.expandTools, c.showThinking, b.done, b.state, b.text.Len(), len(b.lines)}
	if b.cache != nil && b.cacheKey == key && b.kind != blockTool {
		return b.cache
	}
	var lines []string
	w := c.width
	switch b.kind {
	case blockUser:
		lines = c.wrapText(safetext.EscapeText(b.text.String()), w-2, c.st.user.Render("› "), "  ")
	case blockNotice:
		lines = c.wrapText(b.text.String(), w, "", "")
		for i := range lines {
			lines[i] = c.st.dim.Render(lines[i])
		}
	case blockError:
		lines = c.wrapText(safetext.EscapeText(b.text.String()), w-2, c.st.del.Render("✗ "), "  ")
	case blockThinking:
		text := strings.TrimSpace(safetext.EscapeText(b.text.String()))
		n := strings.Count(text, "\n") + 1
		if !c.showThinking {
			verb := "thought"
			if !b.done {
				verb = "thinking…"
			}
			lines = []string{c.st.dim.Render(fmt.Sprintf("▸ %s (%s; Ctrl+T shows)", verb, plural(n, "line")))}
		} else {
			lines = []string{c.st.dim.Render("▾ thinking (Ctrl+T hides)")}
			for _, l := range c.wrapText(text, w-2, "  ", "  ") {
				lines = append(lines, c.st.dim.Render(l))
			}
		}
	case blockAnswer:
		text := safetext.EscapeText(b.text.String())
		if b.done {
			lines = c.markdown(text)
		} else {
			lines = c.wrapText(text, w-2, "  ", "  ")
		}
	case blockTool:
		lines = c.renderTool(b)
	case blockApproval:
		lines = []string{c.st.accent.Render("? " + b.text.String())}
		for _, l := range b.lines {
			lines = append(lines, "  "+l)
		}
	}
	b.cacheKey, b.cache = key, lines
	return lines
}

// wrapText wraps trusted text to width, prefixing the first line with
// first and the others with next.
func (c *chat) wrapText(s string, width int, first, next string) []string {
	s = strings.ReplaceAll(s, "\t", "    ")
	wrapped := ansi.Wrap(s, max(10, width), "")
	lines := strings.Split(wrapped, "\n")
	for i := range lines {
		if i == 0 {
			lines[i] = first + lines[i]
		} else {
			lines[i] = next + lines[i]
		}
	}
	return lines
}

// markdown renders an answer; the text is escaped already.
func (c *chat) markdown(s string) []string {
	if len(s) > mdMaxInput {
		return c.wrapText(s, c.width-2, "  ", "  ")
	}
	lines := renderMarkdown(s, max(20, c.width-4), &darkTheme)
	for i := range lines {
		if lines[i] != "" {
			lines[i] = "  " + lines[i]
		}
	}
	return lines
}

// renderTool shows a call: one line, or its arguments and result when
// expanded.
func (c *chat) renderTool(b *block) []string {
	var icon string
	switch b.state {
	case toolDone:
		icon = c.st.add.Render("✓")
	case toolFailed:
		icon = c.st.del.Render("✗")
	case toolAsking, toolWaiting:
		icon = c.st.warn.Render("?")
	default:
		icon = c.st.accent.Render("•")
	}
	name := safetext.Escape(b.name)
	if b.agent != "" {
		name = safetext.Escape(b.agent) + " › " + name
	}
	head := icon + " " + c.st.tool.Render(name) + " " + argSummary(b.name, b.args)
	if b.parent != nil && !c.expandTools && b.state != toolAsking {
		return nil // folded into the line of the call that runs it (Ctrl+O shows it)
	}
	var tail []string
	if b.children > 0 {
		tail = append(tail, plural(b.children, "call"))
		if b.state == toolRunning && b.lastChild != "" {
			tail = append(tail, "now "+b.lastChild)
		}
	}
	switch b.state {
	case toolFailed:
		// The error itself, its first line: it says why.
		first, _, _ := strings.Cut(strings.TrimSpace(b.result), "\n")
		tail = append(tail, clip(first, 160))
		if b.dur >= time.Second {
			tail = append(tail, b.dur.Round(100*time.Millisecond).String())
		}
	case toolDone:
		tail = append(tail, resultSummary(b.result))
		if b.dur >= time.Second {
			tail = append(tail, b.dur.Round(100*time.Millisecond).String())
		}
	case toolRunning:
		tail = append(tail, fmt.Sprintf("running %ds", int(c.now().Sub(b.start).Seconds())))
	case toolAsking:
		tail = append(tail, "waiting for approval")
	case toolWaiting:
		tail = append(tail, "waiting")
	}
	line := head
	if len(tail) > 0 {
		line += c.st.dim.Render(" · " + strings.Join(tail, " · "))
	}
	if b.parent != nil {
		line = "  " + line // under the call that runs it
	}
	lines := []string{ansi.Truncate(line, c.width, "…")}
	if b.state == toolAsking && c.approval != nil {
		return nil // the approval shows it
	}
	if b.state == toolRunning && len(b.live) > 0 {
		// The last lines of the command's output, escaped.
		out := strings.Split(strings.TrimRight(string(b.live), "\n"), "\n")
		out = out[max(0, len(out)-5):]
		for _, l := range out {
			l = safetext.Escape(strings.TrimSuffix(l, "\r"))
			lines = append(lines, c.st.dim.Render(ansi.Truncate("  │ "+l, c.width, "…")))
		}
	}
	plan := toolPlan(b)
	if plan != nil {
		// The plan as a checklist, as hrns run shows it.
		steps := callview.Plan(plan)
		if len(steps) == 0 {
			steps = []string{"(the plan is cleared)"}
		}
		for _, l := range steps {
			lines = append(lines, ansi.Truncate("    "+l, c.width, "…"))
		}
	}
	if !c.expandTools || b.state < toolRunning {
		return lines
	}
	opts := &safetext.Options{Width: max(20, c.width-6)}
	add := func(label, s string, limit int) {
		lines = append(lines, c.st.dim.Render("  "+label))
		blk := safetext.Render(s, opts)
		for i, l := range blk.Lines {
			if i == limit {
				lines = append(lines, c.st.dim.Render(fmt.Sprintf("    … %d more lines", len(blk.Lines)-limit)))
				break
			}
			lines = append(lines, "    "+l.Text)
		}
	}
	if code, ok := programOf(b.name, b.args); ok {
		// The program numbered, as its approval showed it.
		lines = append(lines, c.st.dim.Render("  program"))
		prog, _ := callview.Program(code, &safetext.Options{Width: max(20, c.width-12)})
		for i, l := range prog {
			if i == 40 {
				lines = append(lines, c.st.dim.Render(fmt.Sprintf("    … %d more lines", len(prog)-i)))
				break
			}
			lines = append(lines, "    "+c.st.dim.Render(l.Gutter)+l.Text)
		}
	} else if plan == nil {
		args := b.args
		var pretty bytes.Buffer
		if json.Indent(&pretty, args, "", "  ") == nil {
			args = pretty.Bytes()
		}
		add("arguments", string(args), 40)
	}
	if b.state >= toolDone {
		add("result", b.result, 200)
	}
	return lines
}

// toolPlan returns the plan a finished todo_write call recorded, or nil.
func toolPlan(b *block) *tools.TodoList {
	if b.name != "todo_write" || b.state != toolDone {
		return nil
	}
	plan, err := tools.ParsePlan(b.args)
	if err != nil {
		return nil
	}
	return plan
}

// programOf returns the program of a run_code call whose only argument is
// its code.
func programOf(tool string, args json.RawMessage) (string, bool) {
	if tool != "run_code" {
		return "", false
	}
	var a map[string]json.RawMessage
	var code string
	if json.Unmarshal(args, &a) != nil || len(a) != 1 || json.Unmarshal(a["code"], &code) != nil {
		return "", false
	}
	return code, true
}

// argSummary shows the one argument that says what a call does: for a
// program its size, for a plan its steps.
func argSummary(tool string, args json.RawMessage) string {
	if code, ok := programOf(tool, args); ok {
		return "a program of " + plural(strings.Count(strings.TrimSuffix(code, "\n"), "\n")+1, "line")
	}
	if tool == "todo_write" {
		if plan, err := tools.ParsePlan(args); err == nil {
			return "plan of " + plural(len(plan.Todos), "step")
		}
	}
	var a map[string]any
	if json.Unmarshal(args, &a) != nil {
		return clip(string(args), 60)
	}
	for _, k := range []string{"command", "path", "url", "pattern", "query", "name", "skill", "description", "task"} {
		if v, ok := a[k].(string); ok {
			return clip(v, 80)
		}
	}
	return clip(string(args), 60)
}

// resultSummary describes a result in a few words: its size, or its
// first line when it is short.
func resultSummary(s string) string {
	s = strings.TrimRight(s, "\n")
	n := strings.Count(s, "\n") + 1
	switch {
	case s == "":
		return "no output"
	case n == 1 && len(s) <= 60:
		return clip(s, 60)
	case n == 1:
		return plural(len(s), "byte")
	default:
		return plural(n, "line")
	}
}

// plural says n things.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// clip shows s on one line, escaped, cut to about n bytes of s.
func clip(s string, n int) string { return callview.OneLine(s, n) }
