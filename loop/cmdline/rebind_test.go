//go:build linux

package cmdline_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
)

// TestDeniedProgramByPatternOrRebind runs lines that run a denied program
// where the parser did not see it, through run_command(rm:*) and then
// through dash and bash themselves: a pathname pattern the shell expands to
// the program's name (in a folder, or against a file the line's working
// directory holds, which a model can make), bash's hash -p, which binds a
// name to a program, and scripts and commands behind options the parser
// did not read as the shells do. Each shell runs the lines in a folder holding a file named rm
// with a PATH whose only rm is a program that leaves a mark; a line the
// rule lets through must leave no mark. (The differential test's stubs
// live in PATH only, so a pattern over a folder or the working directory
// never reaches one there.)
func TestDeniedProgramByPatternOrRebind(t *testing.T) {
	dir := t.TempDir()
	bin, work, marks := filepath.Join(dir, "bin"), filepath.Join(dir, "work"), filepath.Join(dir, "marks")
	for _, d := range []string{bin, work, marks} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub := "#!/bin/sh\n: > " + marks + "/$$\n"
	if err := os.WriteFile(filepath.Join(bin, "rm"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "rm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	def := &loop.ToolDef{Name: "run_command", RequiresApproval: true, Access: loop.AccessExecute, Subject: cmdline.Subject("command")}
	deny := &loop.Permissions{Mode: loop.ModeBypass, Deny: []loop.Rule{{Tool: "run_command", Pattern: "rm:*"}}}
	lines := []string{
		bin + "/r? -f victim",
		bin + "/r[m] -f victim",
		bin + "/r* -f victim",
		"exec " + bin + "/?m -f victim",
		"r? -f victim", // the working directory's file rm, then PATH
		"[r]m -f victim",
		"hash -p " + bin + "/rm ls; ls -f victim",
		"command hash -p " + bin + "/rm ls; ls victim",
		"builtin hash -dp " + bin + "/rm ls; ls victim",
		// The script of sh -c is its first operand, after options.
		"sh -c -e 'rm -f victim'",
		"sh -c -- 'rm -f victim'",
		"sh -c - 'rm -f victim'",
		"bash -c -x 'rm -f victim'",
		"sh -c +e 'rm -f victim'",
		"sh -o errexit -c -o nounset 'rm -f victim'",
		// bash's eval ends its options at --; its exec takes -cla NAME.
		"eval -- 'rm -f victim'",
		"exec -cla n rm -f victim",
	}
	for _, shell := range []string{"dash", "bash"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Skipf("%s is not installed", shell)
		}
		for _, line := range lines {
			args, _ := json.Marshal(map[string]string{"command": line})
			d := deny.Check(def, args)
			if d.Behavior != loop.Allow {
				continue
			}
			cmd := exec.Command(path, "-c", line)
			cmd.Dir, cmd.Env = work, []string{"PATH=" + bin + ":/usr/bin:/bin"}
			out, _ := cmd.CombinedOutput()
			ran, err := os.ReadDir(marks)
			if err != nil {
				t.Fatal(err)
			}
			if len(ran) > 0 {
				t.Errorf("run_command(rm:*) lets %q through (%s), and %s runs rm for it (%s)", line, d.Step, shell, strings.TrimSpace(string(out)))
				for _, e := range ran {
					os.Remove(filepath.Join(marks, e.Name()))
				}
			}
		}
	}
}
