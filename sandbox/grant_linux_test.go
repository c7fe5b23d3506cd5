//go:build linux

package sandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/sandbox"
)

// TestGrantLinkSwapped: a path granted inside a path the command may
// write cannot be widened by a command: the first command replaces it (or
// a directory on its way) by a symbolic link to a host directory; the
// second, with the same spec, must neither write nor read that directory,
// and fails with an error naming the grant. Before the fix the second
// command wrote the victim directory (read-write and working directory
// grants) or read its secret (read-only grants, an overlay's Lower), and
// the parent made Scratch's directories inside it; with the namespaces and
// with Landlock alone, whether the caller side or the helper checks.
func TestGrantLinkSwapped(t *testing.T) {
	needLandlock(t, 1)
	const secret = "grant-secret-0123456789"
	// alias is the operator's link to d, elsewhere.
	type layout struct{ d, victim, alias string }
	cases := []struct {
		name string
		// spec is the spec of both commands, in the layout.
		spec func(l layout) *sandbox.Spec
		// swap is the first command: it runs in spec.Dir.
		swap string
		// grant is the path the refusal must name.
		grant func(l layout) string
		// parentOnly: refused before the helper whatever the test
		// switch (the overlay's paths are resolved there).
		parentOnly bool
	}{
		{
			name:  "read-write",
			spec:  func(l layout) *sandbox.Spec { return &sandbox.Spec{Dir: l.d, ReadWrite: []string{l.d + "/sub"}} },
			swap:  `rm -rf sub && ln -s "$VICTIM" sub`,
			grant: func(l layout) string { return l.d + "/sub" },
		},
		{
			name:  "read-only",
			spec:  func(l layout) *sandbox.Spec { return &sandbox.Spec{Dir: l.d, ReadOnly: []string{l.d + "/sub"}} },
			swap:  `rm -rf sub && ln -s "$VICTIM" sub`,
			grant: func(l layout) string { return l.d + "/sub" },
		},
		{
			name:  "working directory",
			spec:  func(l layout) *sandbox.Spec { return &sandbox.Spec{Dir: l.d + "/sub", ReadWrite: []string{l.d}} },
			swap:  `cd .. && rm -rf sub && ln -s "$VICTIM" sub`,
			grant: func(l layout) string { return l.d + "/sub" },
		},
		{
			// The writable path named through the operator's link
			// to the other: nested all the same.
			name:  "read-write through an alias",
			spec:  func(l layout) *sandbox.Spec { return &sandbox.Spec{Dir: l.d, ReadWrite: []string{l.alias + "/sub"}} },
			swap:  `rm -rf sub && ln -s "$VICTIM" sub`,
			grant: func(l layout) string { return l.alias + "/sub" },
		},
		{
			name:  "intermediate directory",
			spec:  func(l layout) *sandbox.Spec { return &sandbox.Spec{Dir: l.d, ReadWrite: []string{l.d + "/sub/b"}} },
			swap:  `mv sub sub.old && ln -s "$VICTIM" sub`,
			grant: func(l layout) string { return l.d + "/sub/b" },
		},
		{
			name:  "intermediate directory, read-only",
			spec:  func(l layout) *sandbox.Spec { return &sandbox.Spec{Dir: l.d, ReadOnly: []string{l.d + "/sub/b"}} },
			swap:  `mv sub sub.old && ln -s "$VICTIM" sub`,
			grant: func(l layout) string { return l.d + "/sub/b" },
		},
		{
			name:       "scratch",
			spec:       func(l layout) *sandbox.Spec { return &sandbox.Spec{Dir: l.d, Scratch: l.d + "/sub/made/here"} },
			swap:       `rm -rf sub && ln -s "$VICTIM" sub`,
			grant:      func(l layout) string { return l.d + "/sub/made/here" },
			parentOnly: true,
		},
		{
			name: "overlay lower",
			spec: func(l layout) *sandbox.Spec {
				return &sandbox.Spec{Dir: l.d, Overlays: []sandbox.Overlay{{Lower: l.d + "/sub", Upper: l.d + "/up", Work: l.d + "/work", Target: l.d + "/target"}}}
			},
			swap:       `rm -rf sub && ln -s "$VICTIM" sub`,
			grant:      func(l layout) string { return l.d + "/sub" },
			parentOnly: true,
		},
	}
	for _, mode := range []string{"isolated", "landlock"} {
		for _, check := range []string{"spec", "helper"} {
			for _, tc := range cases {
				t.Run(mode+"/"+check+"/"+tc.name, func(t *testing.T) {
					sandbox.SetNoIsolation(mode == "landlock")
					defer sandbox.SetNoIsolation(false)
					l := layout{d: t.TempDir(), victim: t.TempDir()}
					l.alias = filepath.Join(t.TempDir(), "alias")
					if err := os.Symlink(l.d, l.alias); err != nil {
						t.Fatal(err)
					}
					for _, p := range []string{"sub/b", "up", "work", "target"} {
						if err := os.MkdirAll(filepath.Join(l.d, p), 0o755); err != nil {
							t.Fatal(err)
						}
					}
					// The victim: a host directory holding a secret,
					// and a b for the intermediate directory's grant.
					if err := os.MkdirAll(filepath.Join(l.victim, "b"), 0o755); err != nil {
						t.Fatal(err)
					}
					for _, p := range []string{"secret.txt", "b/secret.txt"} {
						if err := os.WriteFile(filepath.Join(l.victim, p), []byte(secret+"\n"), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					spec := tc.spec(l)
					spec.Shell = tc.swap
					spec.Env = []string{"VICTIM=" + l.victim}
					res, err := sandbox.Run(t.Context(), spec)
					if err != nil {
						t.Fatalf("the first command: %v", err)
					}
					if res.ExitCode != 0 {
						t.Fatalf("the first command could not swap: exit %d: %s", res.ExitCode, res.Output)
					}
					if fi, err := os.Lstat(l.d + "/sub"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
						t.Fatalf("%s/sub is not a link after the first command: %v", l.d, err)
					}

					sandbox.SetNoSpecCheck(check == "helper")
					defer sandbox.SetNoSpecCheck(false)
					spec = tc.spec(l)
					spec.Shell = `for f in secret.txt b/secret.txt sub/secret.txt sub/b/secret.txt "$VICTIM/secret.txt" "$VICTIM/b/secret.txt"; do cat "$f" 2>/dev/null; done
for d in . sub sub/b "$VICTIM" "$VICTIM/b"; do echo pwned > "$d/pwned" 2>/dev/null; done
echo DONE`
					spec.Env = []string{"VICTIM=" + l.victim}
					res, err = sandbox.Run(t.Context(), spec)
					if err == nil {
						t.Errorf("the second command ran: %s\n%s", res.Confinement.Summary(), res.Output)
						if strings.Contains(res.Output, secret) {
							t.Errorf("the second command read the victim's secret")
						}
					} else {
						want := sandbox.ErrInvalidSpec
						if check == "helper" && !tc.parentOnly {
							want = sandbox.ErrStart
						}
						if !errors.Is(err, want) || !errors.Is(err, sandbox.ErrLinkBelowWritable) && !strings.Contains(err.Error(), sandbox.ErrLinkBelowWritable.Error()) {
							t.Errorf("the second command's error is %v, want %v and %v", err, want, sandbox.ErrLinkBelowWritable)
						}
						if !strings.Contains(err.Error(), tc.grant(l)) || !strings.Contains(err.Error(), "refused") {
							t.Errorf("the error does not name the grant %s as refused: %v", tc.grant(l), err)
						}
					}
					// Nothing was made in the victim.
					for _, p := range []string{"pwned", "b/pwned", "made", "b/made"} {
						if _, err := os.Lstat(filepath.Join(l.victim, p)); err == nil {
							t.Errorf("the victim's %s was made", p)
						}
					}
				})
			}
		}
	}
}

// TestGrantThroughOperatorLink: a link on the way to a granted path,
// above every writable path, is the operator's and is followed as
// before: the working directory and a read-only path inside it named
// through a link to it, and a read-write path that is itself a link to a
// directory elsewhere.
func TestGrantThroughOperatorLink(t *testing.T) {
	needLandlock(t, 1)
	for _, mode := range []string{"isolated", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			sandbox.SetNoIsolation(mode == "landlock")
			defer sandbox.SetNoIsolation(false)
			d, other, links := t.TempDir(), t.TempDir(), t.TempDir()
			if err := os.MkdirAll(filepath.Join(d, "ro"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "ro", "f"), []byte("readable\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			alias, rw := filepath.Join(links, "alias"), filepath.Join(links, "rw")
			if err := os.Symlink(d, alias); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, rw); err != nil {
				t.Fatal(err)
			}
			res := run(t, &sandbox.Spec{Dir: alias, ReadOnly: []string{alias + "/ro"}, ReadWrite: []string{rw},
				Shell: `cat ro/f && echo w > here && echo w > "$RW/there" && echo ok`, Env: []string{"RW=" + rw}})
			if res.ExitCode != 0 || !strings.Contains(res.Output, "readable\nok") {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Output)
			}
			for _, p := range []string{filepath.Join(d, "here"), filepath.Join(other, "there")} {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("not written: %v", err)
				}
			}
			if !res.Confinement.Confined || (mode == "isolated") != res.Confinement.Isolated {
				t.Errorf("%s", res.Confinement.Summary())
			}
		})
	}
}
