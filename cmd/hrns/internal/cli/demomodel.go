package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/pricing"
)

// demoModelName is what hrns demo shows as its model.
const demoModelName = "hrns-demo (scripted, offline)"

// demoModel is the model of hrns demo: a small, deterministic program, not a
// language model, that works with the reading tools the way a model would.
// It reads the person's message for one of a few intents (tell me about
// this directory, read FILE, find TEXT, list DIR, help), calls list_files,
// read_file or grep in the directory hrns runs in, and writes its answer
// from what those tools returned, so every answer is about the directory
// at hand and true of it. It keeps going for as many turns as the person
// likes and says plainly that it is scripted.
//
// Its state is the conversation itself (the calls and results since the
// person's last message), so it holds nothing between requests and is safe
// for concurrent use.
type demoModel struct {
	calls atomic.Int64 // numbers the tool calls it makes
}

var _ llm.Model = (*demoModel)(nil)

// demoFooter ends the first answer of a conversation.
const demoFooter = "\n\n_This is hrns's offline demo: the answers are written by a small script from what the tools returned, not by a language model. " +
	"Set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY and run `hrns` for a real one._"

// demoHelp says what the demo understands.
const demoHelp = "I am hrns's scripted demo model, so I understand only a few requests, each answered with the real tools in this directory:\n\n" +
	"- **tell me about this directory** (or repository, project): I list it and read its README and build file\n" +
	"- **read FILE** (or show, open): I read the start of a file\n" +
	"- **find TEXT** (or search, grep): I search the files for it\n" +
	"- **list DIR** (or ls): I list a directory\n\n" +
	"A real model understands anything: set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY and run `hrns`."

// The demo model's patterns, compiled when the demo first needs them, not
// at the start of every command.
var (
	demoRead = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(?:read|show|open|cat|print)\s+(?:me\s+)?(?:the\s+)?(?:file\s+)?([^\s"'` + "`" + `]+)`)
	})
	demoFind = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)\b(?:find|search|grep|look)\s+(?:for\s+)?(.+)$`) })
	demoList = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(?:list|ls)\b(?:\s+(?:the\s+)?(?:files\s+)?(?:in\s+|of\s+|under\s+)?([^\s"'` + "`" + `]+))?`)
	})
	demoHit    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([^:\n]+):[0-9]+: `) })
	demoHelpRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(help|what can you|who are you|what are you)\b`)
	})
	demoAbout = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(about|overview|summar|explain|describe|what is (this|here)|repo|project|directory|folder|codebase)`)
	})
)

// demoStep is what the model decided for one request.
type demoStep struct {
	calls []llm.ToolCall
	text  string
}

// Stream implements [llm.Model].
func (m *demoModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		step := m.decide(req)
		resp := &llm.Response{ID: "demo", Model: demoModelName, FinishReason: llm.FinishStop}
		resp.Message.Role = llm.RoleAssistant
		if len(step.calls) > 0 {
			resp.FinishReason = llm.FinishToolCalls
			for i := range step.calls {
				resp.Message.Parts = append(resp.Message.Parts, llm.Part{Kind: llm.PartToolCall, ToolCall: &step.calls[i]})
			}
		} else {
			resp.Message.Parts = []llm.Part{llm.TextPart(step.text)}
		}
		resp.Usage = demoUsage(req, resp)
		for c := range llm.ResponseChunks(resp) {
			if err := ctx.Err(); err != nil {
				yield(llm.Chunk{}, err)
				return
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

// demoUsage estimates tokens at four bytes each, so that the counts the
// command shows move as a real model's would.
func demoUsage(req *llm.Request, resp *llm.Response) llm.Usage {
	var in, out int
	for _, msg := range req.Messages {
		in += demoSize(msg)
	}
	out = demoSize(resp.Message)
	return llm.Usage{InputTokens: int64(in/4 + 1), OutputTokens: int64(out/4 + 1)}
}

func demoSize(msg llm.Message) int {
	n := 0
	for _, p := range msg.Parts {
		n += len(p.Text)
		if p.ToolCall != nil {
			n += len(p.ToolCall.Arguments)
		}
		if p.ToolResult != nil {
			n += len(p.ToolResult.Text())
		}
	}
	return n
}

// demoResult is a call the model made in this turn and what came of it.
type demoResult struct {
	call   llm.ToolCall
	text   string
	failed bool
	done   bool
}

// decide reads the conversation since the person's last message and
// returns the next step.
func (m *demoModel) decide(req *llm.Request) demoStep {
	last := -1
	answers := 0
	for i, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleUser:
			last = i
		case llm.RoleAssistant:
			if len(msg.ToolCalls()) == 0 && msg.Text() != "" {
				answers++
			}
		}
	}
	if last < 0 {
		return demoStep{text: demoHelp}
	}
	prompt := strings.TrimSpace(req.Messages[last].Text())
	var results []*demoResult
	byID := map[string]*demoResult{}
	for _, msg := range req.Messages[last+1:] {
		for _, p := range msg.Parts {
			switch {
			case p.Kind == llm.PartToolCall && p.ToolCall != nil:
				r := &demoResult{call: *p.ToolCall}
				results = append(results, r)
				byID[r.call.ID] = r
			case p.Kind == llm.PartToolResult && p.ToolResult != nil:
				if r := byID[p.ToolResult.CallID]; r != nil {
					r.text, r.failed, r.done = p.ToolResult.Text(), p.ToolResult.IsError, true
				}
			}
		}
	}
	offered := map[string]bool{}
	for _, t := range req.Tools {
		offered[t.Name] = true
	}
	step := m.next(prompt, results, offered)
	if step.text != "" && answers == 0 {
		step.text += demoFooter
	}
	return step
}

// next chooses the step for prompt given the calls made since it.
func (m *demoModel) next(prompt string, results []*demoResult, offered map[string]bool) demoStep {
	intent, arg := demoIntent(prompt)
	switch intent {
	case "read":
		if !offered["read_file"] {
			return demoStep{text: "I cannot read files here: the read_file tool is not offered to me."}
		}
		if len(results) == 0 {
			return m.call("read_file", map[string]any{"path": arg, "limit": 40})
		}
		return demoStep{text: demoReadAnswer(arg, results[0])}
	case "find":
		tool := "grep"
		if !offered["grep"] {
			return demoStep{text: "I cannot search here: the grep tool is not offered to me (try `hrns demo` without --tools, or read FILE)."}
		}
		if len(results) == 0 {
			return m.call(tool, map[string]any{"pattern": regexp.QuoteMeta(arg), "case_insensitive": true, "max_results": 20})
		}
		return demoStep{text: demoFindAnswer(arg, results[0])}
	case "list":
		if !offered["list_files"] {
			return demoStep{text: "I cannot list files here: the list_files tool is not offered to me."}
		}
		if len(results) == 0 {
			return m.call("list_files", map[string]any{"path": arg})
		}
		return demoStep{text: demoListAnswer(arg, results[0])}
	case "about":
		if !offered["list_files"] {
			return demoStep{text: "I cannot look around here: the list_files tool is not offered to me."}
		}
		if len(results) == 0 {
			return m.call("list_files", map[string]any{"path": "."})
		}
		listing := results[0]
		if len(results) == 1 && listing.done && !listing.failed && offered["read_file"] {
			if picks := demoPicks(listing.text); len(picks) > 0 {
				var step demoStep
				for _, p := range picks {
					step.calls = append(step.calls, m.call("read_file", map[string]any{"path": p, "limit": 40}).calls...)
				}
				return step
			}
		}
		return demoStep{text: demoAboutAnswer(listing, results[1:])}
	}
	return demoStep{text: demoHelp}
}

// call makes one tool call with fresh ID.
func (m *demoModel) call(name string, args map[string]any) demoStep {
	b, _ := json.Marshal(args) // maps of strings, numbers and bools always encode
	id := "demo_" + strconv.FormatInt(m.calls.Add(1), 10)
	return demoStep{calls: []llm.ToolCall{{ID: id, Name: name, Arguments: b}}}
}

// demoIntent reads what the person asks for.
func demoIntent(prompt string) (intent, arg string) {
	line := prompt
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	if len(line) > 500 {
		line = line[:500]
	}
	trim := func(s string) string { return strings.Trim(s, " \t.,;:!?\"'`()[]") }
	if sm := demoRead().FindStringSubmatch(line); sm != nil && demoLooksLikePath(trim(sm[1])) {
		return "read", trim(sm[1])
	}
	if sm := demoFind().FindStringSubmatch(line); sm != nil {
		if t := trim(sm[1]); t != "" {
			return "find", t
		}
	}
	if sm := demoList().FindStringSubmatch(line); sm != nil {
		dir := trim(sm[1])
		if dir == "" || strings.EqualFold(dir, "files") || strings.EqualFold(dir, "this") || strings.EqualFold(dir, "here") {
			dir = "."
		}
		return "list", dir
	}
	if demoHelpRe().MatchString(line) {
		return "help", ""
	}
	if demoAbout().MatchString(line) {
		return "about", ""
	}
	return "help", ""
}

// demoLooksLikePath tells a file name from a word such as "me" or "it".
func demoLooksLikePath(s string) bool {
	return strings.ContainsAny(s, "./") || strings.EqualFold(s, "makefile") || strings.EqualFold(s, "dockerfile") || strings.EqualFold(s, "license")
}

// demoManifests are the build files worth reading, by name.
var demoManifests = []string{"go.mod", "package.json", "pyproject.toml", "Cargo.toml", "pom.xml", "build.gradle", "Gemfile", "requirements.txt", "setup.py", "CMakeLists.txt", "Makefile"}

// demoPicks chooses the README and one build file from a listing.
func demoPicks(listing string) []string {
	var readme, manifest string
	entries := demoEntries(listing)
	for _, e := range entries {
		if readme == "" && strings.HasPrefix(strings.ToLower(e), "readme") && !strings.HasSuffix(e, "/") {
			readme = e
		}
	}
	for _, want := range demoManifests {
		for _, e := range entries {
			if e == want && manifest == "" {
				manifest = e
			}
		}
	}
	var picks []string
	for _, p := range []string{readme, manifest} {
		if p != "" {
			picks = append(picks, p)
		}
	}
	return picks
}

// demoEntries returns the paths of a list_files result, without its notes.
func demoEntries(listing string) []string {
	var out []string
	for _, l := range strings.Split(listing, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "(") || strings.Contains(l, " ") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// demoLines strips read_file's line numbers.
func demoLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if i := strings.IndexByte(l, '\t'); i > 0 {
			if _, err := strconv.Atoi(strings.TrimSpace(l[:i])); err == nil {
				lines = append(lines, l[i+1:])
				continue
			}
		}
		if strings.HasPrefix(l, "(") {
			continue // a note of the tool's, such as where to read on
		}
		lines = append(lines, l)
	}
	return lines
}

func demoClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func demoReadAnswer(file string, r *demoResult) string {
	if !r.done {
		return "The read of " + file + " did not finish."
	}
	if r.failed {
		return fmt.Sprintf("I could not read %s: %s\n\nTry **list .** to see what is here.", file, demoClip(strings.TrimSpace(r.text), 300))
	}
	lines := demoLines(r.text)
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > 20 {
		lines = lines[:20]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The first %d lines of %s:\n\n```\n", len(lines), file)
	for _, l := range lines {
		b.WriteString(strings.ReplaceAll(demoClip(l, 200), "```", "'''"))
		b.WriteByte('\n')
	}
	b.WriteString("```")
	if title := demoTitle(lines); title != "" {
		fmt.Fprintf(&b, "\n\nIts title is **%s**.", title)
	}
	return b.String()
}

func demoFindAnswer(text string, r *demoResult) string {
	if r.failed {
		return fmt.Sprintf("The search for %q failed: %s", text, demoClip(strings.TrimSpace(r.text), 300))
	}
	var hits []string
	files := map[string]bool{}
	for _, l := range strings.Split(r.text, "\n") {
		sm := demoHit().FindStringSubmatch(l)
		if sm == nil {
			continue // a context line, a separator or a note of the tool's
		}
		files[sm[1]] = true
		hits = append(hits, l)
	}
	if len(hits) == 0 {
		return fmt.Sprintf("Nothing in this directory matches %q.", text)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%q appears in %s of %s:\n\n```\n", text, demoPlural(len(hits), "line", "lines"), demoPlural(len(files), "file", "files"))
	for _, h := range hits[:min(len(hits), 10)] {
		b.WriteString(strings.ReplaceAll(demoClip(h, 200), "```", "'''"))
		b.WriteByte('\n')
	}
	b.WriteString("```\n\nSay **read FILE** to open one of them.")
	return b.String()
}

func demoListAnswer(dir string, r *demoResult) string {
	if r.failed {
		return fmt.Sprintf("I could not list %s: %s", dir, demoClip(strings.TrimSpace(r.text), 300))
	}
	entries := demoEntries(r.text)
	if len(entries) == 0 {
		return dir + " is empty."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s holds %s:\n\n", dir, demoCount(entries))
	for _, e := range entries[:min(len(entries), 30)] {
		fmt.Fprintf(&b, "- `%s`\n", e)
	}
	if len(entries) > 30 {
		fmt.Fprintf(&b, "- … and %d more\n", len(entries)-30)
	}
	return strings.TrimRight(b.String(), "\n")
}

// demoCount says how many directories and files entries hold.
func demoCount(entries []string) string {
	dirs := 0
	for _, e := range entries {
		if strings.HasSuffix(e, "/") {
			dirs++
		}
	}
	return demoPlural(dirs, "directory", "directories") + " and " + demoPlural(len(entries)-dirs, "file", "files")
}

func demoAboutAnswer(listing *demoResult, reads []*demoResult) string {
	if listing.failed {
		return "I could not list this directory: " + demoClip(strings.TrimSpace(listing.text), 300)
	}
	entries := demoEntries(listing.text)
	if len(entries) == 0 {
		return "This directory is empty: there is nothing for me to describe. Run `hrns demo` in a project's directory, or say **help**."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "This directory holds %s.", demoCount(entries))
	if kinds := demoKinds(entries); kinds != "" {
		fmt.Fprintf(&b, " Most files are %s.", kinds)
	}
	for _, r := range reads {
		var file string
		var args struct {
			Path string `json:"path"`
		}
		if json.Unmarshal(r.call.Arguments, &args) == nil {
			file = args.Path
		}
		if r.failed || !r.done {
			fmt.Fprintf(&b, "\n\nI could not read %s: %s", file, demoClip(strings.TrimSpace(r.text), 200))
			continue
		}
		lines := demoLines(r.text)
		if strings.HasPrefix(strings.ToLower(file), "readme") {
			if title := demoTitle(lines); title != "" {
				fmt.Fprintf(&b, "\n\nIts README is titled **%s**", title)
			} else {
				fmt.Fprintf(&b, "\n\nIts README (%s)", file)
			}
			if para := demoParagraph(lines); para != "" {
				fmt.Fprintf(&b, " and begins:\n\n> %s", para)
			} else {
				b.WriteString(".")
			}
			continue
		}
		if about := demoManifest(path.Base(file), lines); about != "" {
			fmt.Fprintf(&b, "\n\n%s", about)
		}
	}
	b.WriteString("\n\nAsk me to **read FILE**, **find TEXT** or **list DIR** to look closer.")
	return b.String()
}

// demoKinds names the commonest file extensions.
func demoKinds(entries []string) string {
	count := map[string]int{}
	for _, e := range entries {
		if strings.HasSuffix(e, "/") {
			continue
		}
		if ext := path.Ext(e); ext != "" && len(ext) <= 8 {
			count[ext]++
		}
	}
	type kv struct {
		ext string
		n   int
	}
	var all []kv
	for k, v := range count {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].ext < all[j].ext
	})
	var names []string
	for _, e := range all[:min(len(all), 3)] {
		names = append(names, fmt.Sprintf("%s (%d)", e.ext, e.n))
	}
	return strings.Join(names, ", ")
}

// demoTitle returns the first Markdown heading of lines.
func demoTitle(lines []string) string {
	for _, l := range lines {
		if t, ok := strings.CutPrefix(strings.TrimSpace(l), "# "); ok {
			return demoClip(strings.TrimSpace(t), 120)
		}
	}
	return ""
}

// demoParagraph returns the first paragraph of prose after the title.
func demoParagraph(lines []string) string {
	var para []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t == "":
			if len(para) > 0 {
				return demoClip(strings.Join(para, " "), 400)
			}
		case strings.HasPrefix(t, "#"), strings.HasPrefix(t, "!["), strings.HasPrefix(t, "[!["), strings.HasPrefix(t, "<"), strings.HasPrefix(t, "```"):
			if len(para) > 0 {
				return demoClip(strings.Join(para, " "), 400)
			}
		default:
			para = append(para, t)
		}
	}
	return demoClip(strings.Join(para, " "), 400)
}

// demoManifest says what a build file names.
func demoManifest(name string, lines []string) string {
	text := strings.Join(lines, "\n")
	switch name {
	case "go.mod":
		var mod, goV string
		requires := 0
		inRequire := false
		for _, l := range lines {
			t := strings.TrimSpace(l)
			switch {
			case strings.HasPrefix(t, "module "):
				mod = strings.TrimSpace(strings.TrimPrefix(t, "module "))
			case strings.HasPrefix(t, "go "):
				goV = strings.TrimSpace(strings.TrimPrefix(t, "go "))
			case t == "require (":
				inRequire = true
			case t == ")":
				inRequire = false
			case inRequire && t != "" && !strings.HasSuffix(t, "// indirect"):
				requires++
			case strings.HasPrefix(t, "require ") && !strings.HasSuffix(t, "// indirect"):
				requires++
			}
		}
		if mod == "" {
			return ""
		}
		s := fmt.Sprintf("go.mod says it is the Go module `%s`", mod)
		if goV != "" {
			s += " for Go " + goV
		}
		return s + ", with " + demoPlural(requires, "direct requirement", "direct requirements") + " in the lines I read."
	case "package.json":
		var pkg struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		}
		if json.Unmarshal([]byte(text), &pkg) != nil || pkg.Name == "" {
			return "It has a package.json (a Node.js package)."
		}
		s := fmt.Sprintf("package.json names the Node.js package `%s`", demoClip(pkg.Name, 80))
		if pkg.Description != "" {
			s += ": " + demoClip(pkg.Description, 200)
		}
		return s + "."
	case "pyproject.toml", "Cargo.toml":
		for _, l := range lines {
			t := strings.TrimSpace(l)
			if v, ok := strings.CutPrefix(t, "name"); ok {
				v = strings.Trim(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "=")), `"'`)
				if v != "" {
					lang := map[string]string{"pyproject.toml": "Python", "Cargo.toml": "Rust"}[name]
					return fmt.Sprintf("%s names the %s package `%s`.", name, lang, demoClip(v, 80))
				}
			}
		}
	}
	return "It has a " + name + "."
}

func demoPlural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// demoPrices prices the demo's model: it costs nothing.
var demoPrices = pricing.Table{demoModelName: {}}
