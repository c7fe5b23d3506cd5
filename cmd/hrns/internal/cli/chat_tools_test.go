package cli

import (
	"io"
	"testing"
)

// TestChatBrowserTools: hrns chat gives the model the browser's tools as
// hrns run does: all of them with --browser, the named ones with --tools
// browser_*. The chat accepted --browser and gave none.
func TestChatBrowserTools(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		want, not []string
	}{
		{"all", []string{"--browser"}, []string{"browser_navigate", "browser_snapshot", "read_file"}, nil},
		{"named", []string{"--tools", "read_file,browser_snapshot"}, []string{"browser_snapshot", "read_file"}, []string{"browser_navigate"}},
		{"none", nil, []string{"read_file"}, []string{"browser_navigate", "browser_snapshot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			env := map[string]string{"HOME": home, "XDG_CONFIG_HOME": home, "XDG_STATE_HOME": home}
			stdio := &IO{Out: io.Discard, Err: io.Discard, Getenv: func(k string) string { return env[k] }}
			var o runOptions
			fs := commandFlags("hrns chat", chatUsage, stdio)
			o.flags(fs)
			args := append([]string{"--provider", "demo", "--no-skills", "--workdir", t.TempDir()}, tc.args...)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			o.prompt = "chat"
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			s, err := buildSession(t.Context(), &o, stdio)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			for _, n := range tc.want {
				if _, ok := s.tools.Lookup(n); !ok {
					t.Errorf("the chat's tools lack %s", n)
				}
			}
			for _, n := range tc.not {
				if _, ok := s.tools.Lookup(n); ok {
					t.Errorf("the chat's tools have %s", n)
				}
			}
		})
	}
}
