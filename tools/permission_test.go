package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// Every built-in tool says what it may change and what rules match, so
// that the permission modes and rules apply to it.
func TestBuiltinPermissions(t *testing.T) {
	ts, err := tools.ByName([]string{"read_file", "list_files", "write_file", "edit_file", "run_command", "web_fetch", "upload_media"}, &tools.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		access  loop.Access
		subject loop.SubjectKind
	}{
		"read_file":    {loop.AccessRead, loop.SubjectPath},
		"list_files":   {loop.AccessRead, loop.SubjectPath},
		"write_file":   {loop.AccessEdit, loop.SubjectPath},
		"edit_file":    {loop.AccessEdit, loop.SubjectPath},
		"run_command":  {loop.AccessExecute, loop.SubjectCommand},
		"web_fetch":    {loop.AccessRead, loop.SubjectURL},
		"upload_media": {loop.AccessRead, loop.SubjectPath},
	}
	for def := range ts.All() {
		w, ok := want[def.Name]
		if !ok {
			continue
		}
		if def.Access != w.access || def.Subject.Kind != w.subject {
			t.Errorf("%s: access %s subject %q, want %s %q", def.Name, def.Access, def.Subject.Kind, w.access, w.subject)
		}
	}
	// The rules of a policy see the arguments through the subject.
	p := &loop.Permissions{Mode: loop.ModeAcceptEdits, Deny: []loop.Rule{{Tool: "write_file", Pattern: "**/.env"}}}
	def, _ := ts.Lookup("write_file")
	if d := p.Check(&def, json.RawMessage(`{"path":"app/.env","content":"x"}`)); d.Behavior != loop.Deny {
		t.Errorf("write_file app/.env: %+v", d)
	}
	if d := p.Check(&def, json.RawMessage(`{"path":"app/main.go","content":"x"}`)); d.Behavior != loop.Allow || d.Step != loop.StepMode {
		t.Errorf("write_file app/main.go in acceptEdits: %+v", d)
	}
}
