// Package cmdline takes shell command lines apart for the permission rules
// of package loop: [Parse] parses a line as bash reads it (with
// mvdan.cc/sh) into the simple commands it runs, and says whether anything
// else in it could run something its words do not show.
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

// Parse parses a command line as the shell reads it (bash syntax, a
// superset of what /bin/sh accepts). A line that does not parse, or is
// longer than 64 KiB, is an error: it matches no allow rule and every deny
// rule of its tool.
func Parse(line string) (*loop.ParsedCommand, error) {
	if len(line) > maxCommandBytes {
		return nil, fmt.Errorf("the command is longer than %d bytes", maxCommandBytes)
	}
	pc := &parsed{}
	if err := pc.parse(line, 0); err != nil {
		return nil, err
	}
	return &pc.ParsedCommand, nil
}

// parsed is a ParsedCommand being built.
type parsed struct{ loop.ParsedCommand }

// errTooManyWords bounds the work done on one line.
var errTooManyWords = errors.New("the command has too many words")

func (pc *parsed) parse(line string, depth int) error {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil {
		return fmt.Errorf("the command does not parse: %w", err)
	}
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
			for i, w := range n.Args {
				s, ok := wordLiteral(w)
				if !ok {
					pc.opaque("an expansion")
				}
				cmd[i] = s
			}
			words += len(cmd)
			if words > maxCommandWords {
				failed = errTooManyWords
				return false
			}
			pc.Commands = append(pc.Commands, cmd)
			if err := pc.nested(cmd, depth); err != nil {
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
	return failed
}

// nested parses what a command runs itself: the script of sh -c and the
// words of eval, so that deny rules see them.
func (pc *parsed) nested(cmd []string, depth int) error {
	name := cmd[0]
	var script string
	switch {
	case name == "eval":
		script = strings.Join(cmd[1:], " ")
	case isShell(name):
		for i := 1; i < len(cmd)-1; i++ {
			if a := cmd[i]; strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "c") {
				script = cmd[i+1]
				break
			}
		}
		if script == "" {
			return nil
		}
	default:
		return nil
	}
	pc.opaque("a command that runs a script")
	if depth >= maxNesting {
		return errors.New("the command nests shells too deeply")
	}
	return pc.parse(script, depth+1)
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
	if pc.Opaque == "" {
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
// text that holds glob-of-braces or tilde syntax the shell would expand.
func wordLiteral(w *syntax.Word) (string, bool) {
	if w == nil {
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
