package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerSkills: hrns serve offers the skills of its config's skills
// paths (not the default roots) to inline agents by name, and reports the
// skills it skips.
func TestServerSkills(t *testing.T) {
	root := t.TempDir()
	for name, text := range map[string]string{
		"refunds": "---\nname: refunds\ndescription: How to refund.\n---\nRefund within 30 days.\n",
		"broken":  "no front matter\n",
	} {
		os.MkdirAll(filepath.Join(root, name), 0o755)
		os.WriteFile(filepath.Join(root, name, "SKILL.md"), []byte(text), 0o644)
	}
	var stderr bytes.Buffer
	got := serverSkills(&Config{Skills: []string{root}}, &IO{Err: &stderr})
	if s := got["refunds"]; s == nil || s.Description != "How to refund." || !strings.Contains(s.Body, "Refund within 30 days.") || len(got) != 1 {
		t.Errorf("skills = %+v", got)
	}
	if !strings.Contains(stderr.String(), "skill skipped") {
		t.Errorf("stderr = %q, want the broken skill reported", stderr.String())
	}
	if got := serverSkills(&Config{}, &IO{Err: &stderr}); got != nil {
		t.Errorf("skills without paths = %+v", got)
	}
}
