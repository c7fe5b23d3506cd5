package tui

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/pricing"
)

// helpText lists the slash commands and keys.
const helpText = `Commands:
  /model [NAME]    show or switch the model (same provider)
  /tools           list the tools the model may call
  /clear           start a new conversation
  /compact         summarise older turns to free context
  /cost            token usage and cost of this conversation
  /resume [ID]     list this directory's conversations, or continue one
  /help            this help
  /exit            leave (also Ctrl-C twice)
Keys:
  Enter sends · Alt+Enter or Ctrl+J adds a line · ↑/↓ history
  Esc interrupts the turn · Ctrl-C interrupts, twice exits
  PgUp/PgDn scroll · Ctrl+O expands tool calls · Ctrl+T shows thinking`

// command runs a slash command.
func (c *chat) command(text string) tea.Cmd {
	name, arg, _ := strings.Cut(strings.TrimSpace(text), " ")
	arg = strings.TrimSpace(arg)
	c.notice("› " + safetext.Escape(text))
	switch name {
	case "/help", "/?":
		c.notice(helpText)
	case "/exit", "/quit":
		return tea.Quit
	case "/model":
		if arg == "" {
			c.notice("model: " + safetext.Escape(c.modelName) + " (/model NAME switches)")
			return nil
		}
		c.modelName = arg
		if c.conv != nil {
			c.conv.Model = arg
		}
		c.notice("model: " + safetext.Escape(arg) + " from the next message on")
	case "/tools":
		if c.cfg.Tools == nil || c.cfg.Tools.Len() == 0 {
			c.notice("no tools: the model can only answer")
			return nil
		}
		var b strings.Builder
		b.WriteString("Tools:")
		for def := range c.cfg.Tools.All() {
			desc, _, _ := strings.Cut(def.Description, "\n")
			ask := ""
			if def.RequiresApproval {
				ask = " (asks)"
			}
			head := "  " + safetext.Escape(def.Name) + ask + "  "
			fmt.Fprintf(&b, "\n%s%s", head, clip(desc, max(10, c.width-len(head)-2)))
		}
		c.notice(b.String())
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
		list, err := st.List(c.cfg.Workdir, 15)
		if err != nil {
			c.errorNotice(err.Error())
			return
		}
		if len(list) == 0 {
			c.notice("no saved conversation in this directory")
			return
		}
		var b strings.Builder
		b.WriteString("Conversations of this directory (/resume ID continues one):")
		for _, cv := range list {
			fmt.Fprintf(&b, "\n  %s  %s  %s", cv.ID, cv.Updated.Local().Format("2006-01-02 15:04"), safetext.Escape(cv.Title))
		}
		c.notice(b.String())
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
	if cv.Model != "" && c.cfg.ModelName == "" {
		c.modelName = cv.Model
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
	c.notice(fmt.Sprintf("Resumed conversation %s (%s), last saved %s.", cv.ID, safetext.Escape(cv.Title), cv.Updated.Local().Format("2006-01-02 15:04")))
}
