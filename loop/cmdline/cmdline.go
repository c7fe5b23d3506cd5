// Package cmdline takes shell command lines apart for the permission rules
// of package loop: [Parse] parses a line into the simple commands it runs,
// and says whether anything else in it could run something its words do
// not show.
//
// run_command runs a line with /bin/sh, which is dash on Debian and
// Ubuntu, bash on Fedora and macOS (in its POSIX mode there), another
// POSIX shell elsewhere (busybox's ash on Alpine). Parse reads the
// line both ways, as a POSIX shell and as bash (with mvdan.cc/sh): it
// gives the commands of both readings, finds a line they read differently
// opaque, and refuses a line either cannot parse or that holds a form the
// parser reads otherwise than the shells do (see [Parse]), so that the
// rules are judged on what runs whichever of them runs it. A differential
// test and a fuzz target run lines through dash and bash themselves and
// check that every command they run is one Parse saw.
//
// A tool whose calls run command lines declares its command argument with
// [Subject], which gives loop the parser:
//
//	def.Subject = cmdline.Subject("command")
//
// Package loop holds no shell parser itself, so that a program whose tools
// run no shell does not link one; a command subject without a parser is
// refused by loop.Toolset.Add, and loop.Permissions takes its calls as
// command lines that do not parse (see [loop.CommandParser]).
package cmdline

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/hrns-dev/hrns/loop"
)

// Parser is the [loop.CommandParser] of this package: its ParseCommand is
// [Parse].
type Parser struct{}

// ParseCommand parses line with [Parse].
func (Parser) ParseCommand(line string) (*loop.ParsedCommand, error) { return Parse(line) }

// Subject returns the subject of a tool whose argument named argument is a
// shell command line: permission rules match it by command prefix, parsed
// by [Parse].
func Subject(argument string) loop.Subject {
	return loop.Subject{Kind: loop.SubjectCommand, Argument: argument, Parser: Parser{}}
}

// Command-line bounds: a line is untrusted model output.
const (
	maxCommandBytes = 64 << 10
	maxCommandWords = 4096
	maxNesting      = 4 // sh -c / eval inside each other
)

// Parse parses a command line as /bin/sh reads it, whichever shell that
// is: as a POSIX shell (dash) and as bash. Its commands are those of both
// readings; where the readings differ the line is opaque, so that it
// matches no allow rule, and deny rules see the commands of each. A line
// that does not parse either way (bash's &> and &>> redirections, which a
// POSIX shell reads as & and a redirection of the next command; |&;
// here-strings; process substitutions), that holds a here-document and a
// line continued with a backslash (dash and bash end such a document, or
// join its lines, otherwise than the parser does), that defines an alias
// (which changes how what follows reads), or that is longer than 64 KiB,
// is an error: it matches no allow rule and every deny rule of its tool.
func Parse(line string) (*loop.ParsedCommand, error) {
	if len(line) > maxCommandBytes {
		return nil, fmt.Errorf("the command is longer than %d bytes", maxCommandBytes)
	}
	pc, err := parseLine(line, 0)
	if err != nil {
		return nil, err
	}
	return &pc.ParsedCommand, nil
}

// parsed is a ParsedCommand being built.
type parsed struct{ loop.ParsedCommand }

// errTooManyWords bounds the work done on one line.
var errTooManyWords = errors.New("the command has too many words")

// parseLine reads line as a POSIX shell and as bash, and returns the
// reading: bash's, with the commands only the POSIX reading has, and
// opaque if either is or if they differ.
func parseLine(line string, depth int) (*parsed, error) {
	if why := unsettled(line); why != "" {
		return nil, fmt.Errorf("the command holds %s, which the shells read otherwise than the parser", why)
	}
	bash, err := walk(line, syntax.LangBash, depth)
	if err != nil {
		return nil, err
	}
	posix, err := walk(line, syntax.LangPOSIX, depth)
	if err != nil {
		return nil, fmt.Errorf("the command is not read by a POSIX shell (/bin/sh) as bash reads it: %w", err)
	}
	pc := bash
	pc.opaque(posix.Opaque)
	if !slices.EqualFunc(bash.Commands, posix.Commands, slices.Equal) {
		// Both readings' commands, for deny rules; none for allow rules.
		pc.Opaque = "a line read differently by a POSIX shell (/bin/sh) and by bash"
		for _, c := range posix.Commands {
			if !slices.ContainsFunc(pc.Commands, func(d []string) bool { return slices.Equal(c, d) }) {
				pc.Commands = append(pc.Commands, c)
			}
		}
	}
	return pc, nil
}

// unsettled says what in line the parser reads otherwise than dash or
// bash, found by the differential test against them (shells_test.go), or
// "".
func unsettled(line string) string {
	continued := strings.Contains(line, "\\\n")
	switch {
	case strings.ContainsRune(line, '\r'):
		// The parser takes a carriage return for a blank.
		return "a carriage return"
	case continued && strings.Contains(line, "<<"):
		// The shells join the lines of a here-document's body, or end
		// it, where the parser does not.
		return "a here-document and a line continued with a backslash"
	case continued && strings.Contains(line, "#"):
		// The parser continues a comment past a backslash-newline.
		return "a comment and a line continued with a backslash"
	}
	return ""
}

// walk parses line in the shell language lang.
func walk(line string, lang syntax.LangVariant, depth int) (*parsed, error) {
	f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(line), "")
	if err != nil {
		return nil, fmt.Errorf("the command does not parse: %w", err)
	}
	pc := &parsed{}
	words := 0
	var failed error
	syntax.Walk(f, func(n syntax.Node) bool {
		if failed != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.Stmt:
			for _, r := range n.Redirs {
				if !harmlessRedirect(r) {
					pc.opaque("a redirection")
				}
			}
			if n.Coprocess || n.Disown {
				pc.opaque("a coprocess")
			}
		case *syntax.CallExpr:
			if len(n.Assigns) > 0 {
				pc.opaque("an environment assignment")
			}
			if len(n.Args) == 0 {
				return true
			}
			cmd := make([]string, len(n.Args))
			known := make([]bool, len(n.Args))
			for i, w := range n.Args {
				s, ok := wordLiteral(w)
				if !ok {
					pc.opaque("an expansion")
				}
				cmd[i], known[i] = s, ok
			}
			words += len(cmd)
			if words > maxCommandWords {
				failed = errTooManyWords
				return false
			}
			if err := pc.command(cmd, known, depth); err != nil {
				failed = err
				return false
			}
		case *syntax.CmdSubst:
			pc.opaque("a command substitution")
		case *syntax.ProcSubst:
			pc.opaque("a process substitution")
		case *syntax.ParamExp:
			pc.opaque("a variable expansion")
		case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause:
			pc.opaque("arithmetic")
		case *syntax.ExtGlob:
			pc.opaque("an extended glob")
		case *syntax.FuncDecl:
			pc.opaque("a function definition")
		case *syntax.IfClause, *syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause, *syntax.TestClause,
			*syntax.DeclClause, *syntax.TimeClause, *syntax.CoprocClause, *syntax.TestDecl:
			pc.opaque("a shell construct other than simple commands")
		}
		return true
	})
	if failed != nil {
		return nil, failed
	}
	return pc, nil
}

// command adds the simple command cmd (known says which of its words are
// constants), and what it runs itself: the script of sh -c, eval and
// trap, the command after the builtins command, exec and builtin. A
// script that is not a constant is a command whose name is not known,
// which every deny rule matches.
func (pc *parsed) command(cmd []string, known []bool, depth int) error {
	pc.Commands = append(pc.Commands, cmd)
	name := cmd[0]
	switch {
	case name == "alias" && len(cmd) > 1:
		return errors.New("the command defines an alias, which changes how the commands after it read")
	case name == "hash" && slices.ContainsFunc(cmd[1:], func(a string) bool {
		return a == "" || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "p")
	}):
		// bash's hash -p PATH NAME runs PATH for NAME from then on.
		return errors.New("the command binds a command name to a program (hash -p), which changes what the commands after it run")
	case name == "command" || name == "exec" || name == "builtin":
		// The shell runs the words after the options as a command.
		i := 1
		for ; i < len(cmd) && strings.HasPrefix(cmd[i], "-") && len(cmd[i]) > 1; i++ {
			if cmd[i] == "--" {
				i++
				break
			}
			if name == "exec" && strings.Contains(cmd[i], "a") {
				i++ // exec -a NAME, bash's exec -cla NAME
			}
		}
		if i < len(cmd) {
			return pc.command(cmd[i:], known[i:], depth)
		}
		return nil
	case name == "eval":
		if slices.Contains(known[1:], false) {
			return pc.script("", false, depth)
		}
		if len(cmd) > 2 && cmd[1] == "--" {
			// bash's eval ends its options at --, dash's runs it.
			if err := pc.script(strings.Join(cmd[2:], " "), true, depth); err != nil {
				return err
			}
		}
		return pc.script(strings.Join(cmd[1:], " "), true, depth)
	case name == "trap":
		i := 1
		if i < len(cmd) && cmd[i] == "--" {
			i++
		}
		if i < len(cmd)-1 && cmd[i] != "-" && !isDigits(cmd[i]) {
			return pc.script(cmd[i], known[i], depth)
		}
		return nil
	case name == "." || name == "source":
		pc.opaque("a script read from a file")
	case name == "busybox" && len(cmd) > 1:
		// busybox NAME runs its program NAME: busybox rm is rm.
		return pc.command(cmd[1:], known[1:], depth)
	case isShell(name):
		switch i := shellScript(cmd, known); {
		case i == scriptUnknown:
			return pc.script("", false, depth)
		case i > 0:
			return pc.script(cmd[i], known[i], depth)
		}
		pc.opaque("a shell, which runs a script from a file or its input")
	}
	return nil
}

// scriptUnknown is shellScript's answer for a shell whose options hold a
// word that is not a constant: it could be -c, and any word after it the
// script.
const scriptUnknown = -2

// shellScript returns the index in cmd of the script a shell runs with
// -c, as dash and bash read their options: option clusters (- or +) up to
// the first operand or past -- or -, those of -o, +o, -O and +O and bash's
// --rcfile and --init-file taking the next word as their argument; with c
// in a cluster of -, the first operand is the script (sh -c -e 'rm x' runs
// rm x). It returns -1 for a shell without -c or without a script, and
// scriptUnknown when a word that is not a constant stands among the
// options.
func shellScript(cmd []string, known []bool) int {
	c := false
	for i := 1; i < len(cmd); i++ {
		a := cmd[i]
		switch {
		case !known[i]:
			return scriptUnknown
		case a == "--" || a == "-":
			if c && i+1 < len(cmd) {
				if !known[i+1] {
					return scriptUnknown
				}
				return i + 1
			}
			return -1
		case strings.HasPrefix(a, "--"):
			if a == "--rcfile" || a == "--init-file" {
				i++
			}
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			if a[0] == '-' && strings.Contains(a, "c") {
				c = true
			}
			if strings.ContainsAny(a[1:], "oO") {
				i++ // -o NAME, +O NAME...
			}
		default:
			if c {
				return i
			}
			return -1
		}
	}
	return -1
}

// script parses a script a command runs, so that deny rules see its
// commands; one that is not a constant (known false) is a command of
// unknown name.
func (pc *parsed) script(script string, known bool, depth int) error {
	pc.opaque("a command that runs a script")
	if !known {
		pc.Commands = append(pc.Commands, []string{""})
		return nil
	}
	if depth >= maxNesting {
		return errors.New("the command nests shells too deeply")
	}
	inner, err := parseLine(script, depth+1)
	if err != nil {
		return err
	}
	pc.Commands = append(pc.Commands, inner.Commands...)
	pc.opaque(inner.Opaque)
	return nil
}

func isShell(name string) bool {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox":
		return true
	}
	return false
}

func (pc *parsed) opaque(why string) {
	if pc.Opaque == "" && why != "" {
		pc.Opaque = why
	}
}

// harmlessRedirect reports whether r only moves output between the
// command's descriptors or to /dev/null, or reads a here-string or a
// constant here-document.
func harmlessRedirect(r *syntax.Redirect) bool {
	target, ok := wordLiteral(r.Word)
	switch r.Op {
	case syntax.DplOut, syntax.DplIn: // 2>&1, <&0, >&-
		return ok && (target == "-" || isDigits(target))
	case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrIn:
		return ok && target == "/dev/null"
	case syntax.WordHdoc:
		return ok
	case syntax.Hdoc, syntax.DashHdoc:
		if r.Hdoc == nil {
			return true
		}
		_, ok := wordLiteral(r.Hdoc)
		return ok
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// wordLiteral returns the value of a word the shell does not expand: plain
// text, single quotes, and double quotes holding plain text, with quotes
// and backslashes removed. ok is false for anything else, and for plain
// text that holds glob-of-braces or tilde syntax the shell would expand,
// or a pathname pattern (an unquoted * or ?, or [ with a ] after it),
// which the shell replaces with the names of the files it matches: /bin/r?
// runs /bin/rm, and r? a file named rm in the working directory, rm.
func wordLiteral(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
	if isPattern(w) {
		return "", false
	}
	var b strings.Builder
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") || strings.ContainsAny(v, "{}") {
				return "", false
			}
			b.WriteString(unescape(v, false))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescape(l.Value, true))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// isPattern reports whether w holds pathname-expansion syntax outside
// quotes: a * or ? not escaped by a backslash, or such a [ followed, in
// the word, by a ] (quoted or not: taking a word for a pattern that is not
// one only makes it match more deny rules and fewer allow rules).
func isPattern(w *syntax.Word) bool {
	open := false
	for _, part := range w.Parts {
		var text string
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			for i := 0; i < len(v); i++ {
				switch v[i] {
				case '\\':
					i++
				case '*', '?':
					return true
				case '[':
					open = true
				case ']':
					if open {
						return true
					}
				}
			}
			continue
		case *syntax.SglQuoted:
			text = p.Value
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					text += l.Value
				}
			}
		}
		if open && strings.Contains(text, "]") {
			return true
		}
	}
	return false
}

// unescape removes the backslashes the shell removes: before any
// character outside quotes, before $ ` " \ and newline inside double
// quotes; a backslash before a newline removes both.
func unescape(s string, quoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		next := s[i+1]
		switch {
		case next == '\n':
			i++
		case !quoted || strings.IndexByte("$`\"\\", next) >= 0:
			b.WriteByte(next)
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
