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

// unrootableDir makes a directory whose path is 4094 bytes long: the
// command's root is staged under /tmp, where its mount point would be
// longer than a path may be (ENAMETOOLONG), so the root cannot be built
// with it granted, while the namespaces can be made and Landlock grants it
// (an odd path, one per call, on a machine that isolates the others).
func unrootableDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for len(d) < 4094-250 {
		d = filepath.Join(d, strings.Repeat("d", 200))
	}
	d = filepath.Join(d, strings.Repeat("e", 4094-len(d)-1))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Skipf("a path of 4094 bytes: %v", err)
	}
	return d
}

// markerRun is a spec of dir that writes mark/ran, and whether it did.
func markerRun(t *testing.T, dir string) (sandbox.Spec, func() bool) {
	mark := t.TempDir()
	spec := sandbox.Spec{Dir: dir, ReadWrite: []string{mark}, Env: []string{"MARK=" + mark}, Shell: `echo ran > "$MARK/ran"`}
	return spec, func() bool {
		_, err := os.Stat(filepath.Join(mark, "ran"))
		return err == nil
	}
}

// TestRequireIsolation: a command whose root cannot be built, on a
// machine that isolates commands. Without RequireIsolation it runs with
// Landlock alone, as before, its Confinement saying so (before
// RequireIsolation, that was the only way: a caller could not keep such
// a command from running less isolated than the others). With it, Run
// returns ErrNotIsolated, naming why, and the command did not run.
func TestRequireIsolation(t *testing.T) {
	needIsolation(t)
	if err := sandbox.Isolation(); err != nil {
		t.Fatalf("Isolation: %v, on a machine that isolates", err)
	}
	dir := unrootableDir(t)

	spec, ran := markerRun(t, dir)
	res, err := sandbox.Run(t.Context(), &spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Confinement.Isolated || !ran() || !strings.Contains(res.Confinement.Summary(), "the command's root could not be built") {
		t.Fatalf("without RequireIsolation: ran %v, %s", ran(), res.Confinement.Summary())
	}

	spec, ran = markerRun(t, dir)
	spec.RequireIsolation = true
	res, err = sandbox.Run(t.Context(), &spec)
	if !errors.Is(err, sandbox.ErrNotIsolated) || res != nil {
		t.Fatalf("with RequireIsolation: %+v, %v; want ErrNotIsolated", res, err)
	}
	if !strings.Contains(err.Error(), "the command's root could not be built") || !strings.Contains(err.Error(), "it was not run") {
		t.Errorf("the error does not say why, nor that it did not run: %v", err)
	}
	if ran() {
		t.Fatal("the command ran")
	}
	// The machine still isolates the others.
	if err := sandbox.Isolation(); err != nil {
		t.Fatalf("Isolation: %v", err)
	}
	spec, ran = markerRun(t, t.TempDir())
	spec.RequireIsolation = true
	if res, err := sandbox.Run(t.Context(), &spec); err != nil || !res.Confinement.Isolated || !ran() {
		t.Fatalf("another command: %v, ran %v", err, ran())
	}
}

// TestRequireIsolationNoNamespaces: where the namespaces are refused
// (turned off, as by a kernel that refuses them), Isolation says so and
// commands run without them, as documented; one that requires them is
// refused, not run.
func TestRequireIsolationNoNamespaces(t *testing.T) {
	needLandlock(t, 1)
	sandbox.SetNoIsolation(true)
	defer sandbox.SetNoIsolation(false)
	if err := sandbox.Isolation(); !errors.Is(err, sandbox.ErrNotIsolated) {
		t.Fatalf("Isolation: %v, want ErrNotIsolated", err)
	}
	spec, ran := markerRun(t, t.TempDir())
	res, err := sandbox.Run(t.Context(), &spec)
	if err != nil || res.Confinement.Isolated || !ran() {
		t.Fatalf("without RequireIsolation: %v, ran %v", err, ran())
	}
	spec, ran = markerRun(t, t.TempDir())
	spec.RequireIsolation = true
	if res, err := sandbox.Run(t.Context(), &spec); !errors.Is(err, sandbox.ErrNotIsolated) || res != nil || ran() {
		t.Fatalf("with RequireIsolation: %+v, %v, ran %v", res, err, ran())
	}
	b, err := sandbox.NewBox(&spec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if res, err := b.Run(t.Context(), &spec); !errors.Is(err, sandbox.ErrNotIsolated) || res != nil || ran() {
		t.Fatalf("in a Box, with RequireIsolation: %+v, %v, ran %v", res, err, ran())
	}
}

// TestRequireIsolationUnconfined: the two contradict each other.
func TestRequireIsolationUnconfined(t *testing.T) {
	_, err := sandbox.Run(t.Context(), &sandbox.Spec{Shell: "true", Dir: t.TempDir(), Unconfined: true, RequireIsolation: true})
	if !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Fatalf("%v, want ErrInvalidSpec", err)
	}
}

// TestBoxRequireIsolation: as TestRequireIsolation, in a Box (whose
// zygote cannot start there either, so that its commands run as Run runs
// them): without RequireIsolation a command runs with Landlock alone; with
// it, each is refused with ErrNotIsolated and does not run, and a command
// of another Box still runs isolated, in a zygote.
func TestBoxRequireIsolation(t *testing.T) {
	needIsolation(t)
	dir := unrootableDir(t)
	spec, ran := markerRun(t, dir)
	b := newBox(t, spec)
	res, err := b.Run(t.Context(), &spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Confinement.Isolated || !ran() {
		t.Fatalf("without RequireIsolation: ran %v, %s", ran(), res.Confinement.Summary())
	}
	if why := sandbox.BoxPerCall(b); !strings.Contains(why, "the command's root could not be built") {
		t.Errorf("why the commands run as Run runs them: %q", why)
	}
	if err := os.Remove(filepath.Join(spec.ReadWrite[0], "ran")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		spec := spec
		spec.RequireIsolation = true
		res, err := b.Run(t.Context(), &spec)
		if !errors.Is(err, sandbox.ErrNotIsolated) || res != nil || ran() {
			t.Fatalf("command %d with RequireIsolation: %+v, %v, ran %v", i, res, err, ran())
		}
	}
	// Elsewhere, the zygote isolates.
	other, ran := markerRun(t, t.TempDir())
	other.RequireIsolation = true
	ob := newBox(t, other)
	if res, err := ob.Run(t.Context(), &other); err != nil || !res.Confinement.Isolated || !ran() {
		t.Fatalf("another box: %v, ran %v", err, ran())
	}
	if why := sandbox.BoxPerCall(ob); why != "" {
		t.Errorf("another box runs its commands as Run does: %s", why)
	}
}
