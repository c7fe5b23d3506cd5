package sandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/sandbox"
)

// TestOverlay: the command sees the lower layer's files at the target and
// writes there; its writes and deletions land in the upper layer, and the
// lower layer is left as it was (and is read-only at its own path).
func TestOverlay(t *testing.T) {
	dir, state, lower := t.TempDir(), t.TempDir(), t.TempDir()
	upper, work, target := filepath.Join(state, "upper"), filepath.Join(state, "work"), filepath.Join(state, "target")
	for _, d := range []string{upper, work, target} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lower, "shared.txt"), []byte("from the user\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, &sandbox.Spec{
		Shell: "cat " + target + "/shared.txt; echo mine > " + target + "/own.txt && echo WROTE; rm " + target + "/shared.txt && echo REMOVED; " +
			"echo poison > " + lower + "/poison.txt || echo REFUSED",
		Dir:       dir,
		ReadWrite: []string{state},
		Overlays:  []sandbox.Overlay{{Lower: lower, Upper: upper, Work: work, Target: target}},
	})
	if !res.Confinement.Isolated {
		if res.Confinement.Overlays != 0 {
			t.Errorf("not isolated, yet %d overlays mounted", res.Confinement.Overlays)
		}
		t.Skipf("no mount namespace: %s", res.Confinement.Summary())
	}
	if res.Confinement.Overlays != 1 {
		t.Fatalf("the overlay was not mounted: %+v\n%s", res.Confinement, res.Output)
	}
	for _, want := range []string{"from the user\n", "WROTE\n", "REMOVED\n", "REFUSED\n"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Output)
		}
	}
	if b, err := os.ReadFile(filepath.Join(lower, "shared.txt")); err != nil || string(b) != "from the user\n" {
		t.Errorf("the lower layer's file = %q, %v", b, err)
	}
	for _, p := range []string{filepath.Join(lower, "own.txt"), filepath.Join(lower, "poison.txt")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the command wrote the lower layer: %s", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(upper, "own.txt")); err != nil || string(b) != "mine\n" {
		t.Errorf("the upper layer's own.txt = %q, %v", b, err)
	}
}

// TestOverlayErrors: an overlay that cannot be mounted as asked is an
// invalid spec, and nothing runs.
func TestOverlayErrors(t *testing.T) {
	dir, state, lower, outside := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	mk := func(parent, name string) string {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	upper, work, target := mk(state, "upper"), mk(state, "work"), mk(state, "target")
	comma := mk(state, "a,b")
	tests := []struct {
		name string
		o    sandbox.Overlay
		msg  string
	}{
		{"missing field", sandbox.Overlay{Lower: lower, Upper: upper, Target: target}, "needs Lower, Upper, Work and Target"},
		{"missing dir", sandbox.Overlay{Lower: filepath.Join(lower, "nope"), Upper: upper, Work: work, Target: target}, "no such file"},
		{"comma", sandbox.Overlay{Lower: lower, Upper: comma, Work: work, Target: target}, "cannot hold"},
		{"target not writable", sandbox.Overlay{Lower: lower, Upper: upper, Work: work, Target: outside}, "must be inside Dir, Scratch or ReadWrite"},
		{"upper in lower", sandbox.Overlay{Lower: state, Upper: upper, Work: work, Target: target}, "overlap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := filepath.Join(dir, "ran")
			_, err := sandbox.Run(t.Context(), &sandbox.Spec{Shell: "touch " + marker, Dir: dir, ReadWrite: []string{state}, Overlays: []sandbox.Overlay{tt.o}})
			if !errors.Is(err, sandbox.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Run = %v; want ErrInvalidSpec with %q", err, tt.msg)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the command ran")
			}
		})
	}
}
