package skills_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hrns-dev/hrns/skills"
)

// A skill whose files are an fs.FS (as hrns serve's stored skills are)
// works with every tool, and its paths are confined to it.
func TestToolsOverFS(t *testing.T) {
	s := &skills.Skill{
		Name: "acme/lookup", Description: "Looks orders up.", Body: "Read refs/api.md.", Dir: "registry/acme/lookup",
		FS: fstest.MapFS{
			"SKILL.md":        {Data: []byte("---\nname: acme/lookup\ndescription: Looks orders up.\n---\nRead refs/api.md.\n")},
			"refs/api.md":     {Data: []byte("GET /orders/{id}\nreturns the Order\n")},
			"refs/binary.bin": {Data: []byte("\x00\x01")},
		},
	}
	ts := skills.Tools([]*skills.Skill{s}, nil)
	for _, tt := range []struct {
		tool    string
		args    map[string]string
		want    string
		wantErr string
	}{
		{"load_skill", map[string]string{"name": "acme/lookup"}, "Other files (read them with read_skill): refs/api.md, refs/binary.bin", ""},
		{"read_skill", map[string]string{"name": "acme/lookup", "path": "refs/api.md"}, "GET /orders/{id}", ""},
		{"read_skill", map[string]string{"name": "acme/lookup", "path": "refs"}, "api.md\nbinary.bin", ""},
		{"read_skill", map[string]string{"name": "acme/lookup"}, "Read refs/api.md.", ""},
		{"read_skill", map[string]string{"name": "acme/lookup", "path": "../other/SKILL.md"}, "", "outside the folder"},
		{"read_skill", map[string]string{"name": "acme/lookup", "path": "/etc/passwd"}, "", "must be relative"},
		{"read_skill", map[string]string{"name": "acme/lookup", "path": "missing.md"}, "", "has no file missing.md"},
		{"read_skill", map[string]string{"name": "acme/lookup", "path": "refs/binary.bin"}, "", "binary file"},
		{"search_skills", map[string]string{"query": "ORDER"}, "acme/lookup/SKILL.md:3: description: Looks orders up.", ""},
		{"search_skills", map[string]string{"query": "returns the"}, "acme/lookup/refs/api.md:2: returns the Order", ""},
	} {
		got, err := callTool(t, ts, tt.tool, tt.args)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s %v = %q, %v; want an error with %q", tt.tool, tt.args, got, err, tt.wantErr)
			}
		case err != nil || !strings.Contains(got, tt.want):
			t.Errorf("%s %v = %q, %v; want %q in it", tt.tool, tt.args, got, err, tt.want)
		}
	}
}
