package loop

import (
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A ParsedCommand is a shell command line taken apart for permission rules:
// the simple commands it runs and whether anything else in it could run
// something its words do not show.
type ParsedCommand struct {
	// Commands are the simple commands the line runs, each as its words
	// with quotes removed, in source order: the segments split by ; & &&
	// || | and newlines, those inside subshells, groups, control
	// structures and command substitutions, and those of sh -c and eval
	// arguments. A word that is not a constant (it expands a variable, a
	// glob of braces, a substitution) is held as the empty string.
	Commands [][]string
	// Opaque, when not empty, says why the line cannot be proved to run
	// only Commands as they read: a command substitution, a variable or
	// other expansion, a redirection to a file, an environment
	// assignment, a function definition, a control structure... Such a
	// line never matches an allow rule.
	Opaque string
}

// Command-line bounds: a line is untrusted model output.
const (
	maxCommandBytes = 64 << 10
	maxCommandWords = 4096
	maxNesting      = 4 // sh -c / eval inside each other
)

// ParseCommand parses a command line as the shell reads it (bash syntax,
// a superset of what /bin/sh accepts). A line that does not parse, or is
// longer than 64 KiB, is an error: it matches no allow rule and every deny
// rule of its tool.
func ParseCommand(line string) (*ParsedCommand, error) {
	if len(line) > maxCommandBytes {
		return nil, fmt.Errorf("the command is longer than %d bytes", maxCommandBytes)
	}
	pc := &ParsedCommand{}
	if err := pc.parse(line, 0); err != nil {
		return nil, err
	}
	return pc, nil
}

// errTooManyWords bounds the work done on one line.
var errTooManyWords = errors.New("the command has too many words")

func (pc *ParsedCommand) parse(line string, depth int) error {
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
func (pc *ParsedCommand) nested(cmd []string, depth int) error {
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

func (pc *ParsedCommand) opaque(why string) {
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
