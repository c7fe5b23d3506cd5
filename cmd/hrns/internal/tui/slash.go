package tui

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/pricing"
)

// helpText lists the slash commands and keys.
func helpText() string {
	var b strings.Builder
	b.WriteString("Commands (typing / opens this list as a menu):")
	w := 0
	for _, sc := range slashCommands {
		w = max(w, len(sc.name)+1+len(sc.args))
	}
	for _, sc := range slashCommands {
		head := strings.TrimSpace(sc.name + " " + sc.args)
		fmt.Fprintf(&b, "\n  %-*s  %s", w, head, sc.help)
	}
	b.WriteString(`
Keys:
  Enter sends · Alt+Enter or Ctrl+J adds a line · ↑/↓ history
  Shift+Tab cycles the permission mode (shown on the status line)
  @ completes a path of the working directory (Tab or Enter takes it)
  Esc interrupts the turn · Ctrl-C interrupts, twice exits
  PgUp/PgDn scroll · Ctrl+O expands tool calls · Ctrl+T shows thinking`)
	return b.String()
}

// command runs a slash command.
func (c *chat) command(text string) tea.Cmd {
	name, arg, _ := strings.Cut(strings.TrimSpace(text), " ")
	arg = strings.TrimSpace(arg)
	c.notice("› " + safetext.Escape(text))
	switch name {
	case "/help", "/?":
		c.notice(helpText())
	case "/exit", "/quit":
		return tea.Quit
	case "/model":
		if arg == "" {
			return c.listModels()
		}
		c.switchModel(arg)
	case "/mode":
		c.setMode(arg)
	case "/tools":
		if c.cfg.Tools == nil || c.cfg.Tools.Len() == 0 {
			c.notice("no tools: the model can only answer")
			return nil
		}
		c.notice(c.toolList())
	case "/clear":
		if c.busy {
			c.notice("a turn is running: Esc interrupts it first")
			return nil
		}
		c.save()
		c.blocks = nil
		c.usage = map[string]llm.Usage{}
		c.reset()
		c.notice("New conversation.")
	case "/compact":
		if c.busy {
			c.notice("a turn is running: Esc interrupts it first")
			return nil
		}
		return c.compactNow()
	case "/cost":
		c.notice(c.costReport())
	case "/resume":
		if c.busy {
			c.notice("a turn is running: Esc interrupts it first")
			return nil
		}
		c.resume(arg)
	default:
		c.notice("unknown command " + safetext.Escape(name) + ": /help lists them")
	}
	return nil
}

// costReport details usage and cost per model.
func (c *chat) costReport() string {
	if len(c.usage) == 0 {
		return "No tokens used yet."
	}
	var b strings.Builder
	b.WriteString("Usage of this conversation:")
	for _, model := range slices.Sorted(maps.Keys(c.usage)) {
		u := c.usage[model]
		fmt.Fprintf(&b, "\n  %s: %d input (%d cached read, %d cache write), %d output (%d reasoning)",
			safetext.Escape(model), u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.OutputTokens, u.ReasoningTokens)
		if p, ok := c.cfg.Prices.Lookup(model); ok {
			fmt.Fprintf(&b, " = %s", pricing.Format(p.Cost(pricing.Usage(u)).Total))
		} else {
			b.WriteString(": unknown price (set [prices.\"" + safetext.Escape(model) + "\"] in the config)")
		}
	}
	total, unknown := c.cost()
	fmt.Fprintf(&b, "\n  total: %s", pricing.Format(total))
	if len(unknown) > 0 {
		b.WriteString(" plus the models of unknown price")
	}
	return b.String()
}

// resume lists conversations, or continues the one named.
func (c *chat) resume(id string) {
	st := c.cfg.Store
	if st == nil {
		c.notice("conversations are not saved in this chat")
		return
	}
	if id == "" {
		c.pickConversation()
		return
	}
	cv, err := st.Get(id)
	if err != nil {
		c.errorNotice(err.Error())
		return
	}
	c.save()
	c.blocks = nil
	c.load(cv)
}

// save writes the conversation to the store, if there is one.
func (c *chat) save() {
	if c.cfg.Store == nil || c.conv == nil {
		return
	}
	c.conv.Messages = WithoutSystem(c.msgs)
	c.conv.Usage = c.usage
	c.conv.Model = c.modelName
	c.conv.Endpoint = c.cfg.Endpoint
	if err := c.cfg.Store.Save(c.conv); err != nil {
		c.errorNotice(err.Error())
	}
}

// load continues a saved conversation: its transcript after today's
// system prompt, shown as it was.
func (c *chat) load(cv *Conversation) {
	c.conv = cv
	c.msgs = nil
	if c.cfg.System != "" {
		c.msgs = append(c.msgs, llm.SystemMessage(c.cfg.System))
	}
	c.msgs = append(c.msgs, Resumable(cv.Messages)...)
	c.usage = maps.Clone(cv.Usage)
	if c.usage == nil {
		c.usage = map[string]llm.Usage{}
	}
	switch {
	case cv.Model == "":
	case c.cfg.ModelName == "":
		c.modelName = cv.Model
	case !c.cfg.ModelFixed && cv.Endpoint != "" && cv.Endpoint == c.cfg.Endpoint:
		// The model it was switched to, on the provider it was held with.
		c.modelName = cv.Model
	default:
		c.modelName = c.cfg.ModelName
	}
	results := map[string]*llm.ToolResult{}
	for _, m := range cv.Messages {
		for _, p := range m.Parts {
			if p.Kind == llm.PartToolResult && p.ToolResult != nil {
				results[p.ToolResult.CallID] = p.ToolResult
			}
		}
	}
	for _, m := range cv.Messages {
		switch m.Role {
		case llm.RoleUser:
			if t := m.Text(); t != "" {
				b := &block{kind: blockUser, done: true}
				b.text.WriteString(t)
				c.blocks = append(c.blocks, b)
				c.remember(t)
			}
		case llm.RoleAssistant:
			if t := m.Text(); t != "" {
				b := &block{kind: blockAnswer, done: true}
				b.text.WriteString(t)
				c.blocks = append(c.blocks, b)
			}
			for _, call := range m.ToolCalls() {
				b := &block{kind: blockTool, done: true, id: call.ID, name: call.Name, args: call.Arguments.JSON(), state: toolDone}
				if r := results[call.ID]; r != nil {
					b.result = r.Text()
					if r.IsError {
						b.state = toolFailed
					}
				}
				c.blocks = append(c.blocks, b)
			}
		}
	}
	c.notice(fmt.Sprintf("Resumed conversation %s (%s), last saved %s; model %s.", cv.ID, safetext.Escape(cv.Title), cv.Updated.Local().Format("2006-01-02 15:04"), safetext.Escape(c.modelName)))
}

// toolList is /tools: each tool's name, whether it asks, and the first
// line of its description, in aligned columns.
func (c *chat) toolList() string {
	type row struct{ name, ask, desc string }
	var rows []row
	wn := 0
	for def := range c.cfg.Tools.All() {
		desc, _, _ := strings.Cut(def.Description, "\n")
		r := row{name: safetext.Escape(def.Name), desc: desc}
		if def.RequiresApproval {
			r.ask = "asks"
		}
		wn = max(wn, ansi.StringWidth(r.name))
		rows = append(rows, r)
	}
	var b strings.Builder
	b.WriteString("Tools (asks: needs your approval, unless a rule or the mode allows it):")
	for _, r := range rows {
		head := "  " + r.name + strings.Repeat(" ", wn-ansi.StringWidth(r.name)) + "  " + fmt.Sprintf("%-4s", r.ask) + "  "
		fmt.Fprintf(&b, "\n%s%s", head, clip(r.desc, max(10, c.width-ansi.StringWidth(head)-2)))
	}
	return b.String()
}
