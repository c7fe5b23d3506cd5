package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoConversation holds a conversation of several turns with the demo's
// scripted model through the real command, in a directory that is not
// hrns's: every answer is about that directory, made from what the tools
// really returned, and nothing runs out of recorded answers.
func TestDemoConversation(t *testing.T) {
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "README.md"), "![badge](x.svg)\n\n# Widget Factory\n\nWidget Factory makes widgets\nfrom plain text.\n\n## Use\n")
	putFile(t, filepath.Join(dir, "go.mod"), "module example.com/widgets\n\ngo 1.22\n\nrequire (\n\tgithub.com/a/b v1.0.0\n\tgithub.com/c/d v1.0.0 // indirect\n)\n")
	putFile(t, filepath.Join(dir, "cmd", "main.go"), "package main\n\n// TODO: make more widgets\nfunc main() {}\n")
	state := t.TempDir()
	env := map[string]string{"XDG_STATE_HOME": state}
	say := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Run(t.Context(), args, &IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }})
		return code, out.String(), errOut.String()
	}
	t.Chdir(dir)

	turns := []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"demo"}, []string{"1 directory and 2 files", "Widget Factory", "Widget Factory makes widgets from plain text.", "`example.com/widgets` for Go 1.22, with 1 direct requirement in", "not by a language model"}, []string{"This repository is **hrns**"}},
		{[]string{"run", "--provider", "demo", "--tools", "list_files,read_file,grep", "--no-skills", "--continue", "read go.mod"}, []string{"The first 8 lines of go.mod", "module example.com/widgets"}, []string{"not by a language model"}},
		{[]string{"run", "--provider", "demo", "--tools", "list_files,read_file,grep", "--no-skills", "--continue", "find TODO"}, []string{"cmd/main.go:3:", "make more widgets", "1 line of 1 file"}, nil},
		{[]string{"run", "--provider", "demo", "--tools", "list_files,read_file,grep", "--no-skills", "--continue", "list cmd"}, []string{"cmd holds 0 directories and 1 file", "`cmd/main.go`"}, nil},
		{[]string{"run", "--provider", "demo", "--tools", "list_files,read_file,grep", "--no-skills", "--continue", "read missing.txt"}, []string{"I could not read missing.txt"}, nil},
		{[]string{"run", "--provider", "demo", "--tools", "list_files,read_file,grep", "--no-skills", "--continue", "write me a poem"}, []string{"scripted demo model", "read FILE"}, nil},
	}
	for i, tt := range turns {
		code, stdout, stderr := say(tt.args...)
		if code != ExitOK {
			t.Fatalf("turn %d: exit %d\nstdout: %s\nstderr: %s", i, code, stdout, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("turn %d (%s): the answer lacks %q:\n%s\nstderr: %s", i, tt.args[len(tt.args)-1], w, stdout, stderr)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(stdout, n) {
				t.Errorf("turn %d: the answer has %q:\n%s", i, n, stdout)
			}
		}
	}
}

// TestDemoEmptyDirectory: in an empty directory the demo says so, rather
// than describing some other project.
func TestDemoEmptyDirectory(t *testing.T) {
	t.Chdir(t.TempDir())
	code, stdout, stderr := runIn(t, "", "demo")
	if code != ExitOK || !strings.Contains(stdout, "This directory is empty") || strings.Contains(stdout, "hrns is") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if strings.Contains(stderr, "tmp") && strings.Contains(stderr, ".jsonl") {
		t.Errorf("the banner names a temporary file: %s", stderr)
	}
}

func TestDemoIntent(t *testing.T) {
	tests := []struct{ in, intent, arg string }{
		{"Tell me about this repository", "about", ""},
		{"read go.mod", "read", "go.mod"},
		{"Show me the file docs/cli.md, please", "read", "docs/cli.md"},
		{"can you open README.md?", "read", "README.md"},
		{"find TODO", "find", "TODO"},
		{"search for \"func main\"", "find", "func main"},
		{"list docs", "list", "docs"},
		{"ls", "list", "."},
		{"list the files", "list", "."},
		{"help", "help", ""},
		{"write me a poem", "help", ""},
		{"read it to me", "help", ""},
		{"", "help", ""},
	}
	for _, tt := range tests {
		intent, arg := demoIntent(tt.in)
		if intent != tt.intent || arg != tt.arg {
			t.Errorf("demoIntent(%q) = %q, %q; want %q, %q", tt.in, intent, arg, tt.intent, tt.arg)
		}
	}
}
