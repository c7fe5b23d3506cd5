package cmdline_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
)

func TestParse(t *testing.T) {
	tests := []struct {
		line     string
		commands [][]string
		opaque   bool
	}{
		{"git status", [][]string{{"git", "status"}}, false},
		{"  git   status  --short ", [][]string{{"git", "status", "--short"}}, false},
		{"git status; rm -rf x", [][]string{{"git", "status"}, {"rm", "-rf", "x"}}, false},
		{"git status && rm -rf x", [][]string{{"git", "status"}, {"rm", "-rf", "x"}}, false},
		{"git status || rm -rf x", [][]string{{"git", "status"}, {"rm", "-rf", "x"}}, false},
		{"git status | rm -rf x", [][]string{{"git", "status"}, {"rm", "-rf", "x"}}, false},
		{"git status & rm -rf x", [][]string{{"git", "status"}, {"rm", "-rf", "x"}}, false},
		{"git status\nrm -rf x", [][]string{{"git", "status"}, {"rm", "-rf", "x"}}, false},
		{"(git status; rm -rf x)", [][]string{{"git", "status"}, {"rm", "-rf", "x"}}, false},
		{"{ git status; rm -rf x; }", [][]string{{"git", "status"}, {"rm", "-rf", "x"}}, false},
		{"git status $(rm -rf x)", [][]string{{"git", "status", ""}, {"rm", "-rf", "x"}}, true},
		{"git status `rm -rf x`", [][]string{{"git", "status", ""}, {"rm", "-rf", "x"}}, true},
		{`git "status"`, [][]string{{"git", "status"}}, false},
		{`git 'status'`, [][]string{{"git", "status"}}, false},
		{`g\it st\atus`, [][]string{{"git", "status"}}, false},
		{`git "st\"at"`, [][]string{{"git", `st"at`}}, false},
		{"git stat\\\nus", [][]string{{"git", "status"}}, false},
		{`git $'status'`, [][]string{{"git", ""}, {"git", "$status"}}, true},   // dash: $ then 'status'
		{`export A=b; rm x`, [][]string{{"rm", "x"}, {"export", "A=b"}}, true}, // bash: a declaration
		{`command rm -rf x`, [][]string{{"command", "rm", "-rf", "x"}, {"rm", "-rf", "x"}}, false},
		{`exec -a n rm x`, [][]string{{"exec", "-a", "n", "rm", "x"}, {"rm", "x"}}, false},
		{`command -p -- rm x`, [][]string{{"command", "-p", "--", "rm", "x"}, {"rm", "x"}}, false},
		{`trap 'rm -rf x' EXIT`, [][]string{{"trap", "rm -rf x", "EXIT"}, {"rm", "-rf", "x"}}, true},
		{`eval "$X"`, [][]string{{"eval", ""}, {""}}, true},
		{`sh -c "$X"`, [][]string{{"sh", "-c", ""}, {""}}, true},
		{`echo rm x | sh`, [][]string{{"echo", "rm", "x"}, {"sh"}}, true},
		{`bash script.sh`, [][]string{{"bash", "script.sh"}}, true},
		{`. ./env.sh && go test`, [][]string{{".", "./env.sh"}, {"go", "test"}}, true},
		{`git "$X"`, [][]string{{"git", ""}}, true},
		{`$CMD status`, [][]string{{"", "status"}}, true},
		{`{rm,-rf,x}`, [][]string{{""}}, true},
		{`ls ~`, [][]string{{"ls", ""}}, true},
		{`ls *.go`, [][]string{{"ls", ""}}, true},
		{`busybox rm x`, [][]string{{"busybox", "rm", "x"}, {"rm", "x"}}, false},
		{`sh $X 'rm x'`, [][]string{{"sh", "", "rm x"}, {""}}, true},
		{`sh -c -e 'rm x' y`, [][]string{{"sh", "-c", "-e", "rm x", "y"}, {"rm", "x"}}, true},
		{`bash -O extglob +o nounset -c 'rm x'`, [][]string{{"bash", "-O", "extglob", "+o", "nounset", "-c", "rm x"}, {"rm", "x"}}, true},
		{`sh ./x.sh -c 'rm x'`, [][]string{{"sh", "./x.sh", "-c", "rm x"}}, true},
		{`/bin/r? x`, [][]string{{"", "x"}}, true},
		{`[r]m x`, [][]string{{"", "x"}}, true},
		{`ls '*' "?" \* a\?b [x`, [][]string{{"ls", "*", "?", "*", "a?b", "[x"}}, false},
		{`[ -f x ] && ls`, [][]string{{"[", "-f", "x", "]"}, {"ls"}}, false},
		{`git status > out.txt`, [][]string{{"git", "status"}}, true},
		{`git status 2>&1`, [][]string{{"git", "status"}}, false},
		{`git status >/dev/null 2>&1`, [][]string{{"git", "status"}}, false},
		{`FOO=bar git status`, [][]string{{"git", "status"}}, true},
		{`git() { rm -rf x; }; git status`, [][]string{{"rm", "-rf", "x"}, {"git", "status"}}, true},
		{`if true; then rm -rf x; fi`, [][]string{{"true"}, {"rm", "-rf", "x"}}, true},
		{`for f in a; do rm $f; done`, [][]string{{"rm", ""}}, true},
		{`sh -c 'rm -rf x'`, [][]string{{"sh", "-c", "rm -rf x"}, {"rm", "-rf", "x"}}, true},
		{`bash -lc "git status; rm -rf x"`, [][]string{{"bash", "-lc", "git status; rm -rf x"}, {"git", "status"}, {"rm", "-rf", "x"}}, true},
		{`eval rm -rf x`, [][]string{{"eval", "rm", "-rf", "x"}, {"rm", "-rf", "x"}}, true},
		{`echo hi # ; rm -rf x`, [][]string{{"echo", "hi"}}, false},
		{`echo "a;b" 'c && d'`, [][]string{{"echo", "a;b", "c && d"}}, false},
		{`! git status`, [][]string{{"git", "status"}}, false},
		{`cat <<'EOF'
hello $X
EOF`, [][]string{{"cat"}}, false},
		{`cat <<EOF
hello $(rm -rf x)
EOF`, [][]string{{"cat"}, {"rm", "-rf", "x"}}, true},
		{"", nil, false},
	}
	for _, tt := range tests {
		pc, err := cmdline.Parse(tt.line)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.line, err)
			continue
		}
		if diff := cmp.Diff(tt.commands, pc.Commands); diff != "" {
			t.Errorf("Parse(%q) commands (-want +got):\n%s", tt.line, diff)
		}
		if got := pc.Opaque != ""; got != tt.opaque {
			t.Errorf("Parse(%q) opaque = %q, want opaque %v", tt.line, pc.Opaque, tt.opaque)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, line := range []string{
		"git status (",
		"echo 'unclosed",
		"if true; then",
		// Read differently by dash and by bash (issue 32, 1): a POSIX
		// shell reads &> as & and a redirection of the next command.
		"git status &>/dev/null sh -c 'id > f'",
		"git status &>>/dev/null rm -rf x",
		"git status |& rm -rf x",
		"cat <<<x",
		"git status <(rm -rf x)",
		// A here-document with a backslash-newline in its body: the
		// shells join the lines into a command substitution.
		"cat <<EOF\n$\\\n(rm -rf x)\nEOF",
		// A here-document whose end marker follows a backslash-newline.
		"cat <<EOF\nhi \\\nEOF\nrm -rf x\nEOF\n",
		"cat <<E\\\nOF\nx\nEOF\nrm -rf x\nEOF\n",
		"alias ls='rm -rf x'\nls",
		// bash's hash -p binds a name to a program.
		"hash -p /bin/rm ls; ls x",
		"command hash -dp /bin/rm ls; ls x",
		"hash $O /bin/rm ls; ls x",
		// The parser takes \r for a blank, the shells for a letter.
		"git st\ratus; rm x",
		"git status\r\nrm x",
		// The parser continues a comment past a backslash-newline.
		"git status #\\\nrm x",
		strings.Repeat("a", 65<<10),
		strings.Repeat("a ", 5000),
		strings.Repeat("sh -c '", 1) + "sh -c \"eval eval eval eval eval x\"'",
	} {
		if _, err := cmdline.Parse(line); err == nil {
			t.Errorf("Parse(%.40q) = nil error, want one", line)
		}
	}
}

// FuzzParseCommand checks that any line parses or fails without panicking,
// and that an allow rule made of a line's first command never allows a line
// with more in it unless every command is that one.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"git status", "git status; rm -rf x", "a $(b) `c`", "sh -c 'x; y'", "f() { :; }", "a\\\nb", "cat <<E\n$x\nE"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		pc, err := cmdline.Parse(line)
		if err != nil {
			return
		}
		if len(pc.Commands) == 0 || len(pc.Commands[0]) == 0 {
			return
		}
		for _, w := range pc.Commands[0] {
			if w == "" || len(strings.Fields(w)) != 1 || strings.TrimSpace(w) != w {
				return // not a word a rule can spell
			}
		}
		rule := loop.Rule{Tool: "run_command", Pattern: strings.Join(pc.Commands[0], " ") + ":*"}
		if strings.ContainsAny(rule.Pattern, "()") {
			return
		}
		p := &loop.Permissions{Allow: []loop.Rule{rule}}
		def := loop.ToolDef{Name: "run_command", RequiresApproval: true, Subject: cmdline.Subject("command")}
		args, _ := json.Marshal(map[string]string{"command": line})
		d := p.Check(&def, args)
		if d.Behavior == loop.Allow && (pc.Opaque != "" || len(pc.Commands) != 1 && !allSame(pc.Commands)) {
			t.Fatalf("%q allowed by %s although it holds %v (opaque %q)", line, rule, pc.Commands, pc.Opaque)
		}
	})
}

func allSame(cmds [][]string) bool {
	for _, c := range cmds {
		if len(c) < len(cmds[0]) || !slicesHasPrefix(c, cmds[0]) {
			return false
		}
	}
	return true
}

func slicesHasPrefix(a, prefix []string) bool {
	for i := range prefix {
		if a[i] != prefix[i] {
			return false
		}
	}
	return true
}
