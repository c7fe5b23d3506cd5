package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// The controls of the input: the permission mode cycled by Shift+Tab, the
// menu of slash commands and the "@" path completion shown above the
// input as the person types, and the pickers (models, conversations) that
// take the keys until something is picked or Esc closes them.

// Bounds of what the menus show and walk.
const (
	menuRows      = 8      // items shown at once
	maxPathWalk   = 20_000 // directory entries visited for "@" completion
	modelsTimeout = 10 * time.Second
	maxPicked     = 500 // items a picker holds
)

// A slashCommand is a command of the "/" menu.
type slashCommand struct {
	name, args, help string
}

// slashCommands are the chat's commands, in the order of the menu.
var slashCommands = []slashCommand{
	{"/model", "[NAME]", "pick a model of the provider, or switch to NAME"},
	{"/resume", "[ID]", "pick a conversation of this directory, or continue ID"},
	{"/tools", "", "list the tools the model may call"},
	{"/mode", "[MODE]", "show or set the permission mode (also Shift+Tab)"},
	{"/clear", "", "start a new conversation"},
	{"/compact", "", "summarise older turns to free context"},
	{"/cost", "", "token usage and cost of this conversation"},
	{"/help", "", "the commands and keys"},
	{"/exit", "", "leave (also Ctrl-C twice)"},
}

// A menuItem is one line of a menu.
type menuItem struct {
	label, detail string
	value         string
}

// menuKind says what a menu offers.
type menuKind int

const (
	menuCommands menuKind = iota // the "/" menu: filtered by the input
	menuPaths                    // "@" completion: filtered by the token
	menuPick                     // a picker: filtered by what is typed into it
)

// A menu is the list shown above the input.
type menu struct {
	kind   menuKind
	title  string
	all    []menuItem // a picker's items before filtering
	items  []menuItem
	sel    int
	filter string
	// pick acts on the chosen item of a picker.
	pick func(it menuItem) tea.Cmd
	// token is the "@" token being completed: its line, and its start
	// and end columns (runes) in that line.
	line, from, to int
	// waiting: the workdir's paths are being walked.
	waiting bool
}

// modes returns the permission modes Shift+Tab cycles through, in order:
// bypassPermissions only when the chat started in it (--yes, or
// --permission-mode bypassPermissions), as in Claude Code.
func (c *chat) modes() []loop.PermissionMode {
	ms := []loop.PermissionMode{loop.ModeDefault, loop.ModeAcceptEdits, loop.ModePlan}
	if c.bypassOK {
		ms = append(ms, loop.ModeBypass)
	}
	return ms
}

// cycleMode moves to the next permission mode. The calls decided from
// now on follow it, also in the run going on.
func (c *chat) cycleMode() {
	ms := c.modes()
	cur := c.perms.CurrentMode()
	i := slices.Index(ms, cur)
	c.perms.SetMode(ms[(i+1)%len(ms)])
}

// setMode is /mode.
func (c *chat) setMode(arg string) {
	if arg == "" {
		c.notice("permission mode: " + string(c.perms.CurrentMode()) + " (" + modeHelp(c.perms.CurrentMode()) + "); Shift+Tab cycles " + joinModes(c.modes()))
		return
	}
	m, err := loop.ParsePermissionMode(arg)
	if err == nil && m == loop.ModeBypass && !c.bypassOK {
		c.notice("bypassPermissions is offered only to a chat started in it (hrns chat --yes, or --permission-mode bypassPermissions)")
		return
	}
	if err != nil || !slices.Contains(c.modes(), m) {
		c.notice("unknown mode " + safetext.Escape(arg) + ": use one of " + joinModes(c.modes()))
		return
	}
	c.perms.SetMode(m)
	c.notice("permission mode: " + string(m) + " (" + modeHelp(m) + ")")
}

func joinModes(ms []loop.PermissionMode) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// modeHelp says what a mode does, in a few words.
func modeHelp(m loop.PermissionMode) string {
	switch m {
	case loop.ModeAcceptEdits:
		return "file edits run without asking"
	case loop.ModePlan:
		return "read-only: only tools that read run"
	case loop.ModeBypass:
		return "every call runs without asking, but for deny rules and hooks"
	}
	return "asks before calls that change things"
}

// refreshCompletion opens, updates or closes the "/" menu and the "@"
// completion after the input changed.
func (c *chat) refreshCompletion() {
	if c.menu != nil && c.menu.kind == menuPick {
		return
	}
	val := c.input.Value()
	if c.approval != nil || c.reason || val == c.dismissed {
		c.menu = nil
		return
	}
	c.dismissed = ""
	if strings.HasPrefix(val, "/") && !strings.ContainsAny(val, " \n") {
		var items []menuItem
		for _, sc := range slashCommands {
			if strings.HasPrefix(sc.name, val) {
				items = append(items, menuItem{label: sc.name + " " + sc.args, detail: sc.help, value: sc.name})
			}
		}
		c.setMenu(menuCommands, items)
		return
	}
	line, from, to, tok, ok := c.atToken()
	if !ok {
		c.menu = nil
		return
	}
	paths := c.workdirPaths()
	var items []menuItem
	for _, p := range tools.MatchPaths(paths, tok, 50) {
		items = append(items, menuItem{label: "@" + safetext.Escape(p), value: p})
	}
	c.setMenu(menuPaths, items)
	c.menu.waiting = paths == nil
	c.menu.line, c.menu.from, c.menu.to = line, from, to
}

// setMenu shows items in a menu of kind, keeping the selection when it
// can.
func (c *chat) setMenu(kind menuKind, items []menuItem) {
	if c.menu == nil || c.menu.kind != kind {
		c.menu = &menu{kind: kind}
	}
	c.menu.items = items
	c.menu.sel = min(c.menu.sel, max(0, len(items)-1))
	if kind == menuCommands && len(items) == 0 {
		c.menu = nil
	}
}

// atToken finds the word under the cursor when it starts with "@": its
// line, start and end columns, and the text after the "@".
func (c *chat) atToken() (line, from, to int, tok string, ok bool) {
	lines := strings.Split(c.input.Value(), "\n")
	line = c.input.Line()
	if line >= len(lines) {
		return 0, 0, 0, "", false
	}
	rs := []rune(lines[line])
	col := min(c.input.Column(), len(rs))
	from = col
	for from > 0 && !isBlank(rs[from-1]) {
		from--
	}
	to = col
	for to < len(rs) && !isBlank(rs[to]) {
		to++
	}
	if from == to || rs[from] != '@' {
		return 0, 0, 0, "", false
	}
	return line, from, to, string(rs[from+1 : col]), true
}

func isBlank(r rune) bool { return r == ' ' || r == '\t' }

// pathsMsg carries the workdir's paths, walked off the UI's goroutine.
type pathsMsg struct {
	walk  int
	paths []string
}

// workdirPaths returns the paths of the workdir, walked once per turn; nil
// while the walk goes on (a pathsMsg ends it).
func (c *chat) workdirPaths() []string {
	if c.paths == nil && !c.walking && c.cfg.Workdir != "" {
		c.walking = true
		c.walk++
		walk, dir := c.walk, c.cfg.Workdir
		go func() {
			ctx, cancel := context.WithTimeout(c.life, 10*time.Second)
			defer cancel()
			ps, _, _ := tools.ListPaths(ctx, dir, maxPathWalk)
			c.send(c.life, pathsMsg{walk: walk, paths: append([]string{}, ps...)})
		}()
	}
	return c.paths
}

// onPaths takes the walked paths and shows the completion they give.
func (c *chat) onPaths(m pathsMsg) {
	if m.walk != c.walk {
		return // a walk from before the last turn
	}
	c.walking = false
	c.paths = m.paths
	c.refreshCompletion()
}

// completePath puts the chosen path in place of the "@" token. A
// directory stays open for the next level.
func (c *chat) completePath(it menuItem) {
	m := c.menu
	lines := strings.Split(c.input.Value(), "\n")
	if m.line >= len(lines) {
		return
	}
	rs := []rune(lines[m.line])
	ins := "@" + it.value
	if !strings.HasSuffix(it.value, "/") {
		ins += " "
	}
	to := m.to
	if !strings.HasSuffix(it.value, "/") && to < len(rs) && rs[to] == ' ' {
		to++
	}
	lines[m.line] = string(rs[:m.from]) + ins + string(rs[to:])
	c.input.SetValue(strings.Join(lines, "\n"))
	c.input.MoveToBegin()
	for range m.line {
		c.input.CursorDown()
	}
	c.input.SetCursorColumn(m.from + len([]rune(ins)))
	c.menu = nil
	c.refreshCompletion()
}

// menuKey handles a key while a menu is shown; it reports whether the key
// was the menu's.
func (c *chat) menuKey(key string, k tea.KeyPressMsg) (bool, tea.Cmd) {
	m := c.menu
	switch key {
	case "up", "ctrl+p":
		if len(m.items) > 0 {
			m.sel = (m.sel + len(m.items) - 1) % len(m.items)
		}
		return true, nil
	case "down", "ctrl+n":
		if len(m.items) > 0 {
			m.sel = (m.sel + 1) % len(m.items)
		}
		return true, nil
	case "esc":
		if m.kind == menuPick {
			c.menu = nil
			c.notice("(cancelled)")
		} else {
			c.dismissed = c.input.Value()
			c.menu = nil
		}
		return true, nil
	case "tab", "enter":
		if len(m.items) == 0 {
			if m.kind == menuPick {
				return true, nil
			}
			return false, nil
		}
		it := m.items[m.sel]
		switch m.kind {
		case menuCommands:
			c.menu = nil
			if key == "tab" {
				c.input.SetValue(it.value + " ")
				return true, nil
			}
			c.input.Reset()
			c.remember(it.value)
			return true, c.submit(it.value)
		case menuPaths:
			c.completePath(it)
			return true, nil
		case menuPick:
			c.menu = nil
			return true, m.pick(it)
		}
	}
	if m.kind != menuPick {
		return false, nil
	}
	// A picker takes what is typed as its filter.
	switch {
	case key == "backspace":
		if r := []rune(m.filter); len(r) > 0 {
			m.filter = string(r[:len(r)-1])
		}
	case k.Text != "" && !strings.ContainsAny(k.Text, "\n\r\x1b"):
		m.filter += k.Text
	default:
		return true, nil
	}
	m.items = filterItems(m.all, m.filter)
	m.sel = min(m.sel, max(0, len(m.items)-1))
	return true, nil
}

// filterItems keeps the items whose label or detail holds f, ignoring
// case.
func filterItems(all []menuItem, f string) []menuItem {
	if f == "" {
		return all
	}
	f = strings.ToLower(f)
	var out []menuItem
	for _, it := range all {
		if strings.Contains(strings.ToLower(it.label), f) || strings.Contains(strings.ToLower(it.detail), f) {
			out = append(out, it)
		}
	}
	return out
}

// openPicker shows a picker of items; pick acts on the chosen one.
func (c *chat) openPicker(title string, items []menuItem, sel int, pick func(menuItem) tea.Cmd) {
	if len(items) > maxPicked {
		items = items[:maxPicked]
	}
	c.menu = &menu{kind: menuPick, title: title, all: items, items: items, sel: max(0, min(sel, len(items)-1)), pick: pick}
}

// menuLines renders the menu, if any.
func (c *chat) menuLines() []string {
	m := c.menu
	if m == nil {
		return nil
	}
	var out []string
	if m.kind == menuPick {
		t := m.title + " · type to filter · ↑/↓ · Enter picks · Esc cancels"
		if m.filter != "" {
			t = m.title + " · filter: " + safetext.Escape(m.filter) + "▏ · Enter picks · Esc cancels"
		}
		out = append(out, c.st.accent.Render(ansi.Truncate(t, c.width, "…")))
	}
	if len(m.items) == 0 {
		switch {
		case m.kind == menuPaths && m.waiting:
			out = append(out, c.st.dim.Render("  (listing the working directory…)"))
		case m.kind == menuPaths:
			out = append(out, c.st.dim.Render("  no path of the working directory matches"))
		default:
			out = append(out, c.st.dim.Render("  nothing matches"))
		}
		return out
	}
	first := 0
	if m.sel >= menuRows {
		first = m.sel - menuRows + 1
	}
	last := min(len(m.items), first+menuRows)
	wl := 0
	for _, it := range m.items[first:last] {
		wl = max(wl, ansi.StringWidth(it.label))
	}
	for i := first; i < last; i++ {
		it := m.items[i]
		line := it.label + strings.Repeat(" ", wl-ansi.StringWidth(it.label))
		if it.detail != "" {
			line += "  " + c.st.dim.Render(it.detail)
		}
		mark := "  "
		if i == m.sel {
			mark = c.st.accent.Render("› ")
			line = c.st.accent.Render(it.label) + strings.Repeat(" ", wl-ansi.StringWidth(it.label))
			if it.detail != "" {
				line += "  " + it.detail
			}
		}
		out = append(out, ansi.Truncate(mark+line, c.width, "…"))
	}
	if n := len(m.items); n > menuRows {
		out = append(out, c.st.dim.Render(fmt.Sprintf("  %d of %d · ↑/↓ for more", m.sel+1, n)))
	}
	return out
}

// modelsMsg carries the provider's models to Update.
type modelsMsg struct {
	models []string
	err    error
}

// listModels asks the provider for its models, off the UI's goroutine,
// within modelsTimeout.
func (c *chat) listModels() tea.Cmd {
	if c.cfg.ListModels == nil {
		c.pickModel(c.cfg.KnownModels, nil)
		return nil
	}
	c.notice("(asking the provider for its models…)")
	ctx, cancel := context.WithTimeout(c.life, modelsTimeout)
	go func() {
		defer cancel()
		ms, err := c.cfg.ListModels(ctx)
		c.send(c.life, modelsMsg{models: ms, err: err})
	}()
	return nil
}

// pickModel opens the model picker on models (the provider's), or on the
// known models when the provider gave none.
func (c *chat) pickModel(models []string, err error) {
	title := "Pick a model"
	switch {
	case err != nil:
		c.errorNotice(fmt.Sprintf("could not list the provider's models: %v; the models hrns knows are shown", err))
		models = c.cfg.KnownModels
	case len(models) == 0:
		models = c.cfg.KnownModels
	}
	models = slices.Clone(models)
	if !slices.Contains(models, c.modelName) && c.modelName != "" {
		models = append([]string{c.modelName}, models...)
	}
	if len(models) == 0 {
		c.notice("model: " + safetext.Escape(c.modelName) + " (no list of models is known: /model NAME switches)")
		return
	}
	items := make([]menuItem, len(models))
	sel := 0
	for i, m := range models {
		items[i] = menuItem{label: safetext.Escape(m), value: m}
		if m == c.modelName {
			items[i].detail = "(current)"
			sel = i
		}
	}
	c.openPicker(title, items, sel, func(it menuItem) tea.Cmd {
		c.switchModel(it.value)
		return nil
	})
}

// switchModel makes name the model of the next turns and of the
// conversation, so that resuming it later uses it too.
func (c *chat) switchModel(name string) {
	c.modelName = name
	if c.conv != nil {
		c.conv.Model = name
		c.save()
	}
	c.notice("model: " + safetext.Escape(name) + " from the next message on")
}

// pickConversation opens the picker of this directory's conversations.
func (c *chat) pickConversation() {
	st := c.cfg.Store
	if st == nil {
		c.notice("conversations are not saved in this chat")
		return
	}
	list, err := st.List(c.cfg.Workdir, maxPicked)
	if err != nil {
		c.errorNotice(err.Error())
		return
	}
	var items []menuItem
	for _, cv := range list {
		if c.conv != nil && cv.ID == c.conv.ID {
			continue
		}
		t := cv.Title
		if t == "" {
			t = "(no message)"
		}
		items = append(items, menuItem{label: safetext.Escape(t), detail: age(c.now().Sub(cv.Updated)) + " · " + cv.ID, value: cv.ID})
	}
	if len(items) == 0 {
		c.notice("no other saved conversation in this directory")
		return
	}
	c.openPicker("Resume a conversation of this directory", items, 0, func(it menuItem) tea.Cmd {
		c.resume(it.value)
		return nil
	})
}

// age says how long ago something was, in the largest unit.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute") + " ago"
	case d < 24*time.Hour:
		return plural(int(d/time.Hour), "hour") + " ago"
	case d < 60*24*time.Hour:
		return plural(int(d/(24*time.Hour)), "day") + " ago"
	}
	return plural(int(d/(30*24*time.Hour)), "month") + " ago"
}
