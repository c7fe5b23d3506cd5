package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
)

// TestRememberAlways: the "r" answer adds the rule to the run and keeps
// it, mode 0600, for the repository holding the workdir; a later run in
// any directory of that repository finds it, another project does not,
// and a broken file is an error naming it.
func TestRememberAlways(t *testing.T) {
	home := t.TempDir()
	repo := t.TempDir()
	os.Mkdir(filepath.Join(repo, ".git"), 0o755)
	sub := filepath.Join(repo, "cmd", "app")
	os.MkdirAll(sub, 0o755)
	getenv := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	stdio := &IO{In: strings.NewReader("r\n"), Err: &strings.Builder{}, Getenv: getenv, Interactive: func() bool { return true }}
	perms := &loop.Permissions{}
	a := newTermApprover(stdio, perms)
	a.remember = rememberFunc(sub, stdio)
	if d, err := a.Approve(t.Context(), approvalReq("run_command", `{"command":"go test ./..."}`)); err != nil || d.Verdict != loop.Approve {
		t.Fatalf("%+v %v", d, err)
	}
	if out := stdio.Err.(*strings.Builder).String(); !strings.Contains(out, "[r]emember it for this project") || !strings.Contains(out, "remembered for this project") {
		t.Errorf("prompt:\n%s", out)
	}
	def := loop.ToolDef{Name: "run_command", RequiresApproval: true, Subject: cmdline.Subject("command")}
	args, _ := json.Marshal(map[string]string{"command": "go test -run X ./..."})
	if d := perms.Check(&def, args); d.Behavior != loop.Allow {
		t.Errorf("this run: %+v", d)
	}
	path := filepath.Join(home, ".config", "hrns", "remembered.toml")
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("remembered file: %v %v", fi, err)
	}

	// A later run anywhere in the repository.
	later := &loop.Permissions{}
	if err := addRemembered(later, repo, stdio); err != nil {
		t.Fatal(err)
	}
	if d := later.Check(&def, args); d.Behavior != loop.Allow {
		t.Errorf("a later run: %+v", d)
	}
	// Remembering twice keeps one rule.
	if err := remember(repo, getenv, loop.Rule{Tool: "run_command", Pattern: "go test:*"}); err != nil {
		t.Fatal(err)
	}
	if rules, _ := rememberedRules(repo, getenv); len(rules) != 1 {
		t.Errorf("rules = %v", rules)
	}
	// Another project.
	other := &loop.Permissions{}
	if err := addRemembered(other, t.TempDir(), stdio); err != nil || len(other.Allow) != 0 {
		t.Errorf("another project: %v %v", other.Allow, err)
	}
	// A broken file is said, not skipped.
	os.WriteFile(path, []byte("[[project]\n"), 0o600)
	if err := addRemembered(&loop.Permissions{}, repo, stdio); err == nil || !strings.Contains(err.Error(), "remembered.toml") {
		t.Errorf("broken file: %v", err)
	}
}
