package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/tools"
)

func TestTaskTools(t *testing.T) {
	parent, err := tools.ByName([]string{"read_file", "grep", "write_file"}, &tools.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		names   []string
		want    []string
		wantErr string
	}{
		{nil, []string{"read_file", "grep", "write_file"}, ""},
		{[]string{"grep", "read_file", "grep"}, []string{"grep", "read_file"}, ""},
		{[]string{"run_command"}, nil, `"run_command" is not one of them: choose among read_file, grep, write_file`},
		{[]string{"task"}, nil, "cannot have the task tool"},
	}
	for _, tt := range tests {
		ts, err := taskTools(parent, tt.names)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: err = %v, want %q", tt.names, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(ts.Names(), tt.want) {
			t.Errorf("%v: %v, %v; want %v", tt.names, ts.Names(), err, tt.want)
		}
	}
	if names, had := splitTask([]string{"read_file", " task", "grep"}); !had || !slices.Equal(names, []string{"read_file", "grep"}) {
		t.Errorf("splitTask = %v, %v", names, had)
	}
	if _, err := namedTools([]string{"task"}, &toolEnv{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "subagents") {
		t.Errorf("hrns serve's tools accept task: %v", err)
	}
}
