//go:build linux

package sandbox_test

// Attacks on a Box by its commands: each command is the attacker's, and
// so is a sequence of them in the same Box. Each test is an attack that
// must fail.

import (
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/sandbox"
)

// TestBoxAttackZygoteLimits: prlimit(2) lets a process change the limits
// of another process of its user (any thread of it) without a
// capability, and a command is root as its zygote is: a command lowering
// the zygote's limits (or raising a soft one to its hard one) must not
// leave them to the next command.
func TestBoxAttackZygoteLimits(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	first := boxRun(t, b, spec, `command -v prlimit >/dev/null || { echo no-prlimit; exit; }
cat /proc/self/limits
for t in /proc/1/task/*; do prlimit --pid ${t##*/} --nofile=20:20 --core=unlimited --stack=100000:100000; done
prlimit --pid 1 --nofile --core | grep -c 20 >&2`)
	if strings.Contains(first.Output, "no-prlimit") {
		t.Skip("no prlimit in the sandbox")
	}
	if !strings.HasSuffix(first.Output, "1\n") {
		t.Fatalf("the zygote's limits were not changed, the attack is not shown: %q", first.Output)
	}
	want := strings.TrimSuffix(first.Output, "1\n")
	if got := boxRun(t, b, spec, `cat /proc/self/limits`).Output; got != want {
		t.Fatalf("the next command's limits:\n%s\nthe first's:\n%s", got, want)
	}
}
