package loop

import "errors"

// A ParsedCommand is a shell command line taken apart for permission rules:
// the simple commands it runs and whether anything else in it could run
// something its words do not show. A [CommandParser] makes it.
type ParsedCommand struct {
	// Commands are the simple commands the line runs, each as its words
	// with quotes removed, in source order: the segments split by ; & &&
	// || | and newlines, those inside subshells, groups, control
	// structures and command substitutions, those of the scripts of sh
	// -c, eval and trap, and the command after command, exec and
	// builtin. A word that is not a constant (it expands a variable, a
	// glob of braces, a pathname pattern such as *.go or /bin/r?, a
	// substitution) is held as the empty string; a
	// script that is not a constant is a command of one such word.
	Commands [][]string
	// Opaque, when not empty, says why the line cannot be proved to run
	// only Commands as they read: a command substitution, a variable or
	// other expansion, a redirection to a file, an environment
	// assignment, a function definition, a control structure... Such a
	// line never matches an allow rule.
	Opaque string
}

// A CommandParser takes the command lines of a tool's calls apart for
// permission rules ([Subject.Parser]). Package
// github.com/hrns-dev/hrns/loop/cmdline has the one hrns's tools use: it
// parses as a POSIX shell (dash) and as bash do, and refuses what they
// could read differently (cmdline.Subject gives a subject with it). The loop
// holds no shell parser of its own, so that a program whose tools run no
// shell does not link one.
type CommandParser interface {
	// ParseCommand returns what line runs. An error means the line
	// cannot be taken apart: it matches every deny rule of its tool that
	// has a pattern, and no allow rule.
	ParseCommand(line string) (*ParsedCommand, error)
}

// ErrNoCommandParser is the error of a tool whose [Subject] is a command
// without a [CommandParser]: [Toolset.Add] refuses such a tool, and
// [Permissions.Check] takes its calls as command lines that do not parse
// (every deny rule of the tool with a pattern matches, no allow rule does).
var ErrNoCommandParser = errors.New("the tool's command subject has no parser: set Subject.Parser (cmdline.Subject from github.com/hrns-dev/hrns/loop/cmdline)")

// parseCommand parses line with p, failing closed: no parser, or a parser
// that returns nothing, is an error.
func parseCommand(p CommandParser, line string) (*ParsedCommand, error) {
	if p == nil {
		return nil, ErrNoCommandParser
	}
	pc, err := p.ParseCommand(line)
	if err == nil && pc == nil {
		err = errors.New("the command parser returned no command")
	}
	if err != nil {
		return nil, err
	}
	return pc, nil
}
