package tools_test

import (
	"os"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/tools"
)

func TestByName(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		names   []string
		want    string
		wantErr string
	}{
		{names: strings.Split("read_file, list_files,,read_file", ","), want: "read_file,list_files"},
		{names: []string{"web_fetch", "run_command", "edit_file"}, want: "web_fetch,run_command,edit_file"},
		{names: tools.Names(), want: "read_file,list_files,write_file,edit_file,grep,run_command,web_fetch,upload_media,todo_write"},
		{names: []string{"upload_media"}, want: "upload_media"},
		{names: []string{"todo_write", "grep"}, want: "todo_write,grep"},
		{names: nil, want: ""},
		{names: []string{"read_file", "rm_rf"}, wantErr: `unknown tool "rm_rf"; the built-in tools are read_file, list_files, write_file, edit_file, grep, run_command, web_fetch, upload_media, todo_write`},
	}
	for _, tt := range tests {
		ts, err := tools.ByName(tt.names, &tools.Config{Dir: dir})
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: got %v, want error %q", tt.names, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tt.names, err)
			continue
		}
		if got := strings.Join(ts.Names(), ","); got != tt.want {
			t.Errorf("%v: got %s, want %s", tt.names, got, tt.want)
		}
	}
	// Options reach the tools.
	ts, err := tools.ByName([]string{"write_file", "run_command"}, &tools.Config{
		Dir:   dir,
		Files: &tools.FilesOptions{SkipApproval: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if def, _ := ts.Lookup("write_file"); def.RequiresApproval {
		t.Error("write_file requires approval despite SkipApproval")
	}
	if def, _ := ts.Lookup("run_command"); !def.RequiresApproval {
		t.Error("run_command does not require approval")
	}
	for _, name := range []string{"read_file", "upload_media"} {
		if _, err := tools.ByName([]string{name}, &tools.Config{Dir: dir + "/missing"}); err == nil {
			t.Errorf("%s: a missing directory was accepted", name)
		}
	}
	// upload_media reads from Dir, with its options.
	writeBytes(t, dir, "chart.png", pngBytes(t, 20, 10))
	ts, err = tools.ByName([]string{"upload_media"}, &tools.Config{Dir: dir, Media: &tools.MediaOptions{MaxImageSide: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := upload(t, ts, "chart.png"); err == nil || !strings.Contains(err.Error(), "chart.png is 20x10 pixels") {
		t.Errorf("upload_media through ByName: %v", err)
	}
	if def, _ := ts.Lookup("upload_media"); !def.Concurrent || def.RequiresApproval {
		t.Error("upload_media is not a concurrent tool without approval")
	}
}

// TestByNameFileToolsAsFilesIn: ByName builds only the file tools asked
// for, and each is the tool FilesIn builds, with the same options.
func TestByNameFileToolsAsFilesIn(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	opts := &tools.FilesOptions{SkipApproval: true, DefaultReadLines: 7}
	all := tools.FilesIn(root, opts)
	for _, name := range []string{"read_file", "list_files", "write_file", "edit_file"} {
		ts, err := tools.ByName([]string{name}, &tools.Config{Dir: dir, Files: opts})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := ts.Lookup(name)
		want, _ := all.Lookup(name)
		if !ok || got.Handler == nil {
			t.Fatalf("%s: not built", name)
		}
		if got.Name != want.Name || got.Description != want.Description || string(got.InputSchema) != string(want.InputSchema) ||
			got.Concurrent != want.Concurrent || got.Timeout != want.Timeout || got.RequiresApproval != want.RequiresApproval ||
			got.Access != want.Access || got.Subject != want.Subject {
			t.Errorf("%s: ByName built %+v, FilesIn %+v", name, got, want)
		}
	}
	if ts, _ := tools.ByName([]string{"read_file"}, &tools.Config{Dir: dir}); len(ts.Names()) != 1 {
		t.Errorf("read_file alone gave %v", ts.Names())
	}
}
