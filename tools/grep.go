package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"regexp/syntax"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/loop"
)

// GrepOptions configure the grep tool of [Grep] and [GrepIn]. A nil
// *GrepOptions, and the zero value of each field, mean the documented
// defaults.
type GrepOptions struct {
	// MaxResults is the most matching lines one call returns, and the
	// highest max_results the model may ask for. 0 means 1000; the
	// model's default is 100 or MaxResults, whichever is lower.
	MaxResults int
	// MaxOutputBytes caps the text one call returns; results past it
	// are cut and the output says so. 0 means 50 KiB; smaller values than
	// 4 KiB are raised to 4 KiB, so that a long line always fits.
	MaxOutputBytes int
	// MaxFileBytes is the largest file searched; larger files are
	// skipped and counted in the output. 0 means 8 MiB.
	MaxFileBytes int64
	// Workers is how many files are searched at once. 0 means
	// GOMAXPROCS.
	Workers int
	// AllowHardLinks searches regular files that have more than one
	// hard link. By default they are skipped, as the file tools refuse
	// them (see [FilesOptions.AllowHardLinks]).
	AllowHardLinks bool
}

func (o *GrepOptions) withDefaults() GrepOptions {
	var v GrepOptions
	if o != nil {
		v = *o
	}
	if v.MaxResults <= 0 {
		v.MaxResults = 1000
	}
	if v.MaxOutputBytes <= 0 {
		v.MaxOutputBytes = 50 << 10
	}
	v.MaxOutputBytes = max(v.MaxOutputBytes, 4<<10)
	if v.MaxFileBytes <= 0 {
		v.MaxFileBytes = 8 << 20
	}
	if v.Workers <= 0 {
		v.Workers = runtime.GOMAXPROCS(0)
	}
	return v
}

// The bounds of one grep call that no option changes.
const (
	maxGrepPattern = 4096    // bytes of the regular expression
	maxGrepContext = 10      // context lines on each side
	maxGrepLine    = 400     // bytes of one line shown
	maxGrepWalk    = 500_000 // directory entries visited
	maxGrepDepth   = 256     // directory levels walked down
)

// Grep returns the grep tool, confined to the directory dir, which is
// opened once as an [os.Root] that stays open for the life of the
// program; use [GrepIn] to own the root instead.
func Grep(dir string, opts *GrepOptions) (*loop.Toolset, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: opening the grep root: %w", err)
	}
	return GrepIn(root, opts), nil
}

// GrepIn returns the grep tool, which searches the files under root for
// lines matching a regular expression (Go's RE2 syntax, which runs in
// time linear in the input), and returns them as "path:line: text", with
// context lines as "path-line- text" and groups separated by "--".
// Results are in the order of a walk that visits each directory's entries
// sorted by name, whatever the number of workers.
//
// It has the confinement of the file tools: paths are relative to root,
// and nothing leads out of it. The walk does not follow symbolic links
// (a file or directory reached by one is not searched, as with grep -r),
// skips .git directories, FIFOs, devices and sockets, files with more than
// one hard link (unless opts.AllowHardLinks), files larger than
// opts.MaxFileBytes and binary files (a NUL byte in the first 8 KiB). It
// honours the .gitignore files of root and of every directory below it,
// and root's .git/info/exclude, with git's rules; a path named
// explicitly is searched even if it is ignored. Ignore files outside root
// (a repository's top level above it, the user's global excludes) are not
// read. The call stops when ctx is done.
//
// grep is Concurrent and needs no approval.
func GrepIn(root *os.Root, opts *GrepOptions) *loop.Toolset {
	g := &grepTool{c: newConfined(root), o: opts.withDefaults()}
	return loop.MustToolset(g.tool())
}

type grepTool struct {
	c *confined
	o GrepOptions
}

type grepArgs struct {
	Pattern         string `json:"pattern" jsonschema:"the regular expression to find in each line (Go RE2 syntax: \\bword\\b, (a|b), [0-9]+, \\. for a literal dot)"`
	Path            string `json:"path,omitempty" jsonschema:"the file or directory to search, relative to the working directory (default: the working directory)"`
	Glob            string `json:"glob,omitempty" jsonschema:"search only files matching this glob: without a slash it matches file names at any depth (*.go), with one it matches paths relative to path (cmd/**/*.go)"`
	CaseInsensitive bool   `json:"case_insensitive,omitempty" jsonschema:"match letters in either case (default false)"`
	Context         int    `json:"context,omitempty" jsonschema:"lines to show before and after each matching line, 0 to 10 (default 0)"`
	MaxResults      int    `json:"max_results,omitempty" jsonschema:"the most matching lines to return (the tool's description gives the default and the limit)"`
}

func (g *grepTool) tool() *loop.ToolDef {
	desc := fmt.Sprintf("Searches the contents of files in the working directory for lines matching a regular "+
		"expression (Go RE2 syntax), like grep -rn. Each match is one line \"path:line: text\"; with context, the "+
		"lines around it are \"path-line- text\" and separate groups are split by \"--\". Paths are relative to the "+
		"working directory, so they can be given to read_file as they are. Files ignored by .gitignore, .git "+
		"directories, binary files and symbolic links are skipped. Returns at most max_results matching lines "+
		"(default %d, at most %d) and %s; lines longer than %d bytes are cut around the match.",
		min(100, g.o.MaxResults), g.o.MaxResults, size(g.o.MaxOutputBytes), maxGrepLine)
	def := loop.NewTool("grep", desc, func(ctx context.Context, in grepArgs) (string, error) {
		return g.grep(ctx, in)
	})
	def.Concurrent = true
	def.Access, def.Subject = loop.AccessRead, pathSubject
	return def
}

// A grepQuery is a validated call.
type grepQuery struct {
	// whole finds candidate matches in a whole file (multi-line mode);
	// line confirms them on the candidate's line.
	whole, line *regexp.Regexp
	// lit is a string every match holds, on one line, when the pattern
	// has one worth searching for (see requiredLiteral); fold says it is
	// to be found in either case (ASCII only).
	lit      []byte
	fold     bool
	glob     *glob
	baseName bool // glob has no slash: it matches names at any depth
	context  int
	max      int
}

func (g *grepTool) query(in grepArgs) (*grepQuery, error) {
	if in.Pattern == "" {
		return nil, errors.New("pattern is required")
	}
	if len(in.Pattern) > maxGrepPattern {
		return nil, fmt.Errorf("the pattern is %d bytes long; grep takes patterns of at most %d", len(in.Pattern), maxGrepPattern)
	}
	if in.Context < 0 || in.Context > maxGrepContext {
		return nil, fmt.Errorf("context must be between 0 and %d", maxGrepContext)
	}
	if in.MaxResults < 0 || in.MaxResults > g.o.MaxResults {
		return nil, fmt.Errorf("max_results must be between 1 and %d", g.o.MaxResults)
	}
	q := &grepQuery{context: in.Context, max: in.MaxResults}
	if q.max == 0 {
		q.max = min(100, g.o.MaxResults)
	}
	flags := ""
	if in.CaseInsensitive {
		flags = "(?i)"
	}
	var err error
	if q.line, err = regexp.Compile(flags + in.Pattern); err != nil {
		return nil, fmt.Errorf("pattern %q is not a valid regular expression: %v", in.Pattern, explainRegexp(err))
	}
	// In multi-line mode ^ and $ match at line ends, so every match of
	// the pattern in a line is a match in the whole file (\A and \z
	// aside: those patterns are matched line by line).
	if !strings.Contains(in.Pattern, `\A`) && !strings.Contains(in.Pattern, `\z`) {
		q.whole, _ = regexp.Compile("(?m)" + flags + "(?:" + in.Pattern + ")")
	}
	if lit, fold := requiredLiteral(flags + in.Pattern); len(lit) >= 3 {
		q.lit, q.fold = []byte(lit), fold
	}
	if pat := strings.TrimPrefix(strings.TrimSpace(in.Glob), "./"); pat != "" {
		if q.glob, err = compileGlob(pat); err != nil {
			return nil, err
		}
		q.baseName = !strings.Contains(pat, "/")
	}
	return q, nil
}

// explainRegexp drops the package prefix of a regexp error.
func explainRegexp(err error) string {
	if se, ok := err.(interface{ Unwrap() error }); ok && se.Unwrap() != nil {
		return se.Unwrap().Error()
	}
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

// grepFile is one file to search, in walk order, and what searching it
// found.
type grepFile struct {
	rel string
	// dir is the directory holding the file, opened as a root (nil: the
	// root itself), and name the file's name in it: opening one name in
	// an open directory costs one system call, where a path costs one
	// for each of its components.
	dir   *grepDir
	name  string
	done  chan struct{}
	lines []grepLine
	skip  string // why it was not searched: "binary", "large", "links", "unreadable"
}

// A grepLine is a matching line or a context line.
type grepLine struct {
	n     int
	match bool
	text  string
}

// grepStats counts what a call skipped.
type grepStats struct {
	files   int
	skipped map[string]int
}

func (g *grepTool) grep(ctx context.Context, in grepArgs) (string, error) {
	q, err := g.query(in)
	if err != nil {
		return "", err
	}
	rel, err := g.c.rel(in.Path)
	if err != nil {
		return "", err
	}
	shown := in.Path
	if shown == "" {
		shown = "."
	}
	info, err := g.c.root.Stat(rel)
	if err != nil {
		return "", g.c.explain(shown, err)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	files := make(chan *grepFile, 4*g.o.Workers) // in walk order, to the assembler
	jobs := make(chan *grepFile, 4*g.o.Workers)  // to the workers
	var walkErr error
	walkCut := false
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(files)
		defer close(jobs)
		send := func(f *grepFile) bool {
			select {
			case files <- f:
			case <-ctx.Done():
				return false
			}
			select {
			case jobs <- f:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if !info.IsDir() {
			send(&grepFile{rel: rel, name: rel, done: make(chan struct{})})
			return
		}
		w := &grepWalk{g: g, q: q, ctx: ctx, send: send, base: rel}
		walkErr = w.dir(nil, rel, rel, w.ancestors(rel), 0)
		walkCut = w.cut
	})
	for range g.o.Workers {
		wg.Go(func() {
			buf := make([]byte, 0, 64<<10)
			var low []byte
			for f := range jobs {
				buf = g.search(ctx, q, f, buf, &low)
				f.dir.release()
				close(f.done)
			}
		})
	}

	var out strings.Builder
	stats := grepStats{skipped: map[string]int{}}
	matches, last, cutBy := 0, "", ""
	for f := range files {
		select {
		case <-f.done:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		stats.files++
		if f.skip != "" {
			stats.skipped[f.skip]++
			continue
		}
		prev := -1
		for _, l := range f.lines {
			if l.match && matches == q.max {
				cutBy = "max_results"
				break
			}
			sep := ":"
			if !l.match {
				sep = "-"
			}
			entry := fmt.Sprintf("%s%s%d%s", f.rel, sep, l.n, sep)
			if l.text != "" {
				entry += " " + l.text
			}
			entry += "\n"
			if q.context > 0 && last != "" && (last != f.rel || l.n != prev+1) {
				entry = "--\n" + entry
			}
			if out.Len()+len(entry) > g.o.MaxOutputBytes {
				cutBy = "bytes"
				break
			}
			out.WriteString(entry)
			last, prev = f.rel, l.n
			if l.match {
				matches++
			}
		}
		if cutBy != "" {
			break
		}
	}
	cancel()
	for range files { // let the walker end
	}
	wg.Wait()
	if cutBy == "" {
		if err := parent.Err(); err != nil {
			return "", err
		}
		if walkErr != nil && !errors.Is(walkErr, errGrepStop) {
			return "", g.c.explain(shown, walkErr)
		}
	}
	return g.report(&out, in, shown, matches, cutBy, walkCut, &stats), nil
}

// report ends the output with what was cut or skipped.
func (g *grepTool) report(out *strings.Builder, in grepArgs, shown string, matches int, cutBy string, walkCut bool, stats *grepStats) string {
	var notes []string
	switch cutBy {
	case "max_results":
		notes = append(notes, fmt.Sprintf("stopped at %s (max_results); there may be more: narrow the pattern, path or glob", plural(matches, "matching line")))
	case "bytes":
		notes = append(notes, fmt.Sprintf("output cut at %s after %s; narrow the pattern, path or glob", size(g.o.MaxOutputBytes), plural(matches, "matching line")))
	}
	if walkCut {
		notes = append(notes, fmt.Sprintf("the search stopped after visiting %d entries; narrow the path or the glob", maxGrepWalk))
	}
	var skipped []string
	for _, k := range []struct{ key, what string }{
		{"binary", "binary"},
		{"large", "larger than " + size(int(g.o.MaxFileBytes))},
		{"links", "with several hard links"},
		{"unreadable", "unreadable"},
	} {
		if n := stats.skipped[k.key]; n > 0 {
			skipped = append(skipped, fmt.Sprintf("%d %s", n, k.what))
		}
	}
	if len(skipped) > 0 {
		notes = append(notes, "files skipped: "+strings.Join(skipped, ", "))
	}
	if matches == 0 && cutBy == "" {
		s := fmt.Sprintf("(no line matches %q in %s", in.Pattern, shown)
		if in.Glob != "" {
			s += fmt.Sprintf(" among files matching %q", in.Glob)
		}
		searched := stats.files
		for _, n := range stats.skipped {
			searched -= n
		}
		s += fmt.Sprintf("; %s searched)", plural(searched, "file"))
		for _, n := range notes {
			s += "\n[" + n + "]"
		}
		return s
	}
	text := out.String()
	if cutBy == "" {
		notes = append(notes, plural(matches, "matching line"))
	}
	return text + "[" + strings.Join(notes, "; ") + "]"
}

// plural writes n things: "1 file", "2 files".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// search searches one file and records what it found in f; buf is the
// worker's read buffer, returned for reuse.
func (g *grepTool) search(ctx context.Context, q *grepQuery, f *grepFile, buf []byte, low *[]byte) []byte {
	if ctx.Err() != nil {
		return buf
	}
	root := g.c.root
	if f.dir != nil {
		root = f.dir.root
	}
	file, err := root.OpenFile(f.name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		f.skip = "unreadable"
		return buf
	}
	defer file.Close()
	info, err := file.Stat()
	switch {
	case err != nil || !info.Mode().IsRegular():
		f.skip = "unreadable"
		return buf
	case linkCount(info) > 1 && !g.o.AllowHardLinks:
		f.skip = "links"
		return buf
	case info.Size() > g.o.MaxFileBytes:
		f.skip = "large"
		return buf
	}
	buf = buf[:0]
	if need := int(info.Size()) + 1; cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	n, err := io.ReadFull(io.LimitReader(file, g.o.MaxFileBytes+1), buf[:cap(buf)])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		f.skip = "unreadable"
		return buf
	}
	data := buf[:n]
	if int64(n) > g.o.MaxFileBytes || n == cap(buf) && n > int(info.Size()) {
		f.skip = "large" // it grew while read
		return buf
	}
	if bytes.IndexByte(data[:min(len(data), sniffLen)], 0) >= 0 {
		f.skip = "binary"
		return buf
	}
	f.lines = grepData(ctx, q, data, low)
	return buf
}

// grepData finds the matching lines of data, with their context, at most
// q.max matching lines. low is a buffer grepData may reuse for a
// lower-case copy of data.
func grepData(ctx context.Context, q *grepQuery, data []byte, low *[]byte) []grepLine {
	// Candidate lines are those holding the required literal, when the
	// pattern has one: a substring search is much faster than the
	// regexp's, above all in either case, where the regexp has no
	// literal prefix to skip ahead with.
	var hay []byte // where lit is searched
	if q.lit != nil {
		hay = data
		if q.fold {
			var ascii bool
			hay, ascii = lowerASCII(data, low)
			// (?i) also folds two letters that are not ASCII onto ASCII
			// ones: the Kelvin sign onto k and the long s onto s. In a
			// file holding either, the regexp finds the candidates.
			if !ascii && bytes.ContainsAny(q.lit, "ks") && (bytes.Contains(data, []byte("\u212a")) || bytes.Contains(data, []byte("\u017f"))) {
				hay = nil
			}
		}
	}
	var lines []grepLine
	lineNo, counted := 1, 0 // the line number of offset counted
	lastShown := 0          // the last line number added to lines
	matches := 0
	pos := 0
	for pos <= len(data) && matches < q.max {
		if matches&255 == 255 && ctx.Err() != nil {
			return nil
		}
		// The next candidate line.
		start := pos
		if hay != nil {
			i := bytes.Index(hay[pos:], q.lit)
			if i < 0 {
				break
			}
			start = pos + bytes.LastIndexByte(data[pos:pos+i], '\n') + 1
		} else if q.whole != nil {
			loc := q.whole.FindIndex(data[pos:])
			if loc == nil {
				break
			}
			start = pos + bytes.LastIndexByte(data[pos:pos+loc[0]], '\n') + 1
		}
		if start == len(data) && start > 0 && data[start-1] == '\n' {
			break // past the last line
		}
		end := start + lineEnd(data[start:])
		line := data[start:end]
		lineNo += bytes.Count(data[counted:start], []byte{'\n'})
		counted = start
		pos = end + 1
		loc := q.line.FindIndex(line)
		if loc == nil {
			continue
		}
		matches++
		// Lines before it, from the end of what was shown.
		if q.context > 0 {
			from := max(lastShown+1, lineNo-q.context)
			before := linesBefore(data, start, lineNo-from)
			for i, l := range before {
				lines = append(lines, grepLine{n: from + i, text: showLine(l, nil)})
			}
		}
		lines = append(lines, grepLine{n: lineNo, match: true, text: showLine(line, loc)})
		lastShown = lineNo
		if q.context > 0 {
			// Lines after it, up to the next candidate: they are added
			// as context unless a later match claims them.
			p := pos
			for i := 1; i <= q.context && p < len(data); i++ {
				e := p + lineEnd(data[p:])
				l := data[p:e]
				if q.line.Match(l) {
					break // the next match: the loop shows it
				}
				lines = append(lines, grepLine{n: lineNo + i, text: showLine(l, nil)})
				lastShown = lineNo + i
				p = e + 1
			}
		}
	}
	return lines
}

// lowerASCII returns data with its ASCII letters in lower case (other
// bytes as they are), in *buf (grown as needed), and whether data is all
// ASCII.
func lowerASCII(data []byte, buf *[]byte) ([]byte, bool) {
	if cap(*buf) < len(data) {
		*buf = make([]byte, len(data))
	}
	out := (*buf)[:len(data)]
	var high byte
	for i, b := range data {
		high |= b
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		out[i] = b
	}
	return out, high < utf8.RuneSelf
}

// requiredLiteral returns a string that every match of the regular
// expression pattern holds, and whether it matches in either case, in
// which case the string is in lower case; "" when it finds none, or the
// one it finds holds a newline or, in either case, a byte that is not
// ASCII. It looks at the expression's top: a literal, or the longest
// literal required by the parts of a concatenation (a group, x+, x{n,}
// with n ≥ 1 require what x does).
func requiredLiteral(pattern string) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	lit, fold := required(re.Simplify())
	switch {
	case strings.Contains(lit, "\n"):
		return "", false
	case fold:
		for i := range len(lit) {
			if lit[i] >= utf8.RuneSelf {
				return "", false
			}
		}
		return strings.ToLower(lit), true
	}
	return lit, false
}

func required(re *syntax.Regexp) (string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return string(re.Rune), re.Flags&syntax.FoldCase != 0
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		best, bestFold := "", false
		for _, sub := range re.Sub {
			if lit, fold := required(sub); len(lit) > len(best) {
				best, bestFold = lit, fold
			}
		}
		return best, bestFold
	}
	return "", false
}

// lineEnd returns the length of the first line of b, without its newline.
func lineEnd(b []byte) int {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return i
	}
	return len(b)
}

// linesBefore returns the n lines that end just before offset start.
func linesBefore(data []byte, start, n int) [][]byte {
	out := make([][]byte, n)
	end := start - 1 // the newline ending the line before
	for i := n - 1; i >= 0 && end >= 0; i-- {
		s := bytes.LastIndexByte(data[:end], '\n') + 1
		out[i] = data[s:end]
		end = s - 1
	}
	return out
}

// showLine renders a line for the output: valid UTF-8, without its
// carriage return, and when longer than maxGrepLine, cut to a window that
// holds the start of the match at loc (nil for a context line).
func showLine(line []byte, loc []int) string {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) <= maxGrepLine {
		return strings.ToValidUTF8(string(line), "\uFFFD")
	}
	from := 0
	if loc != nil && loc[0] > maxGrepLine/2 {
		from = min(loc[0]-maxGrepLine/4, len(line)-maxGrepLine)
	}
	for from > 0 && !utf8.RuneStart(line[from]) {
		from--
	}
	to := from + maxGrepLine
	for to < len(line) && !utf8.RuneStart(line[to]) {
		to--
	}
	s := strings.ToValidUTF8(string(line[from:to]), "\uFFFD")
	if from > 0 {
		s = "…" + s
	}
	if to < len(line) {
		s += "…"
	}
	return fmt.Sprintf("%s [line of %d bytes cut]", s, len(line))
}

// grepWalk walks a directory tree for grep, in sorted order, sending each
// file to search.
type grepWalk struct {
	g       *grepTool
	q       *grepQuery
	ctx     context.Context
	send    func(*grepFile) bool
	base    string // the directory searched
	visited int
	cut     bool
}

var errGrepStop = errors.New("stop")

// ancestors returns the ignore rules that apply under dir: root's
// .git/info/exclude, then the .gitignore files of root and of each
// directory down to dir.
func (w *grepWalk) ancestors(dir string) *ignoreRules {
	root := w.g.c.root
	ign := loadIgnoreFile(root, nil, ".git/info/exclude", ".")
	if dir == "." {
		return ign
	}
	ign = loadIgnoreFile(root, ign, ".gitignore", ".")
	parts := strings.Split(dir, "/")
	for i := range parts[:len(parts)-1] {
		d := strings.Join(parts[:i+1], "/")
		ign = loadIgnoreFile(root, ign, d+"/.gitignore", d)
	}
	return ign
}

// A grepDir is a directory being walked, opened as a root through its
// parent's, so that nothing opened in it can lead out of the tool's root.
// It is closed once the walk has left it and its files are searched.
type grepDir struct {
	root *os.Root
	refs atomic.Int64
}

// release drops one reference to d, and closes it with the last.
func (d *grepDir) release() {
	if d != nil && d.refs.Add(-1) == 0 {
		d.root.Close()
	}
}

// dir walks the directory rel, open as parent's entry name (the tool's
// root itself when parent is nil); ign holds the rules of the directories
// above it.
func (w *grepWalk) dir(parent *grepDir, name, rel string, ign *ignoreRules, depth int) error {
	open := w.g.c.root.OpenRoot
	if parent != nil {
		open = parent.root.OpenRoot
	}
	sub, err := open(name)
	if err != nil {
		if depth == 0 {
			return err
		}
		return nil // an unreadable directory
	}
	d := &grepDir{root: sub}
	d.refs.Store(1)
	defer d.release()
	ign = loadIgnoreFile(sub, ign, ".gitignore", rel)
	entries, err := fs.ReadDir(sub.FS(), ".")
	if err != nil && depth == 0 {
		return err
	}
	for _, e := range entries {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		w.visited++
		if w.visited > maxGrepWalk {
			w.cut = true
			return errGrepStop
		}
		name := e.Name()
		p := name
		if rel != "." {
			p = rel + "/" + name
		}
		t := e.Type()
		switch {
		case t&fs.ModeSymlink != 0:
			continue // not followed
		case e.IsDir():
			if name == ".git" || depth >= maxGrepDepth || ign.ignored(p, true) {
				continue
			}
			if err := w.dir(d, name, p, ign, depth+1); err != nil {
				return err
			}
		case t.IsRegular():
			if ign.ignored(p, false) || !w.q.wants(w.base, p) {
				continue
			}
			d.refs.Add(1)
			if !w.send(&grepFile{rel: p, dir: d, name: name, done: make(chan struct{})}) {
				d.release()
				return w.ctx.Err()
			}
		}
	}
	return nil
}

// wants reports whether the glob selects the file p, found under the
// directory searched, base.
func (q *grepQuery) wants(base, p string) bool {
	if q.glob == nil {
		return true
	}
	if q.baseName {
		return q.glob.match([]string{path.Base(p)})
	}
	if base != "." {
		p = strings.TrimPrefix(p, base+"/")
	}
	return q.glob.match(strings.Split(p, "/"))
}
