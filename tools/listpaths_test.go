package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hrns-dev/hrns/tools"
)

func TestListPaths(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		".gitignore":         "build/\n*.log\n",
		"main.go":            "package main\n",
		"debug.log":          "x",
		"build/out":          "x",
		"src/app/handler.go": "package app\n",
		"src/.gitignore":     "gen.go\n",
		"src/gen.go":         "x",
		".git/config":        "x",
		".git/info/exclude":  "secret.txt\n",
		"secret.txt":         "x",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, cut, err := tools.ListPaths(context.Background(), dir, 1000)
	if err != nil || cut {
		t.Fatalf("ListPaths: cut %v, %v", cut, err)
	}
	want := []string{".gitignore", "main.go", "src/", "src/.gitignore", "src/app/", "src/app/handler.go"}
	if !slices.Equal(got, want) {
		t.Errorf("ListPaths = %q, want %q", got, want)
	}
	if got, cut, _ := tools.ListPaths(context.Background(), dir, 3); !cut || len(got) > 3 {
		t.Errorf("bounded to 3 entries: %q, cut %v", got, cut)
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"hand", []string{"src/app/handler.go"}},
		{"SRC", []string{"src/", "src/app/", "src/.gitignore", "src/app/handler.go"}},
		{"app/h", []string{"src/app/handler.go"}},
		{"nothing", nil},
	}
	for _, tt := range tests {
		if got := tools.MatchPaths(want, tt.query, 8); !slices.Equal(got, tt.want) {
			t.Errorf("MatchPaths(%q) = %q, want %q", tt.query, got, tt.want)
		}
	}
}
