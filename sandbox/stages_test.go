//go:build linux

package sandbox_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/sandbox"
)

// stagesProbe prints what a command's confinement is made of, as the
// command sees it: its user, capabilities, no_new_privs, signal masks and
// dispositions, rlimits, descriptors, mounts, whether it may signal or
// read its parent (the helper) and what it may write.
const stagesProbe = `id
grep -E '^(Uid|Gid|Groups|Umask|Cap|NoNewPrivs|Seccomp|Sig(Blk|Ign))' /proc/self/status
cat /proc/self/limits
ls /proc/self/fd
cut -d' ' -f5,6 /proc/self/mountinfo | sort
ls /
pwd
kill -0 $PPID 2>&1; echo kill=$?
cat /proc/$PPID/environ 2>&1 | tr '\0' '\n'
cat /proc/1/cmdline 2>&1 | tr '\0' ' '; echo
touch ok && echo wrote
`

// stagesWrites tries to write outside the command's paths.
const stagesWrites = `for p in /etc /usr /tmp /; do touch $p/hrns-stages-test 2>&1; done
`

var hostPID = regexp.MustCompile(`/proc/[0-9]+/`)

// TestOneStageSameAsTwo: where the helper's first stage starts the command
// itself (one execution of the binary fewer), the command gets exactly the
// confinement the second stage gave it: the same user, capabilities,
// no_new_privs, limits, descriptors, mounts, Landlock rules and scoping
// (it can neither signal nor read the helper), the same report, the same
// errors. Each spec runs both ways and everything is compared.
func TestOneStageSameAsTwo(t *testing.T) {
	needLandlock(t, 1)
	specs := []struct {
		name        string
		spec        sandbox.Spec
		noIsolation bool
		pids        bool // the PIDs are the namespace's, the same each run
	}{
		{name: "default", spec: sandbox.Spec{Shell: "echo pid=$$ ppid=$PPID; " + stagesProbe + stagesWrites, Limits: sandbox.DefaultLimits}, pids: true},
		{name: "network", spec: sandbox.Spec{Shell: stagesProbe + stagesWrites, Limits: sandbox.DefaultLimits, AllowNetwork: true}},
		{name: "no limits", spec: sandbox.Spec{Shell: stagesProbe}},
		{name: "private tmp", spec: sandbox.Spec{Shell: stagesProbe, PrivateTmp: true, Terminals: true, Limits: sandbox.Limits{CPUTime: 7e9, FileSize: 1 << 20}}},
		{name: "not isolated", spec: sandbox.Spec{Shell: stagesProbe + stagesWrites, Limits: sandbox.DefaultLimits}, noIsolation: true},
		{name: "unconfined", spec: sandbox.Spec{Shell: stagesProbe, Unconfined: true}},
		{name: "exit code", spec: sandbox.Spec{Shell: "exit 3", RequireConfinement: true}},
		{name: "exec fails", spec: sandbox.Spec{Command: []string{"/nonexistent/program"}}},
		{name: "not found", spec: sandbox.Spec{Command: []string{"no-such-program-here"}}},
		{name: "stdin", spec: sandbox.Spec{Shell: "cat", Stdin: nil}},
	}
	for _, tc := range specs {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			got := map[bool]string{}
			for _, two := range []bool{false, true} {
				sandbox.SetTwoStages(two)
				sandbox.SetNoIsolation(tc.noIsolation)
				spec := tc.spec
				spec.Dir = dir
				res, err := sandbox.Run(t.Context(), &spec)
				sandbox.SetTwoStages(false)
				sandbox.SetNoIsolation(false)
				if res != nil {
					res.Duration = 0
				}
				got[two] = fmt.Sprintf("err: %v\nresult: %+v", err, res)
				if !tc.pids {
					// Outside a PID namespace of its own, the helper's
					// PID is the host's, another each run.
					got[two] = hostPID.ReplaceAllString(got[two], "/proc/PID/")
				}
				// In its PID namespace, the command's PID comes after the
				// helper's threads, whose number the Go runtime decides
				// (7 or 8 on one machine, from run to run): its parent,
				// the helper as init, is what must be the same.
				got[two] = commandPID.ReplaceAllString(got[two], "pid=N ppid=")
			}
			if diff := cmp.Diff(got[true], got[false]); diff != "" {
				t.Errorf("one stage (+) differs from two (-):\n%s", diff)
			}
			t.Logf("%s", got[false])
		})
	}
}

// commandPID matches the probe's "pid=N ppid=".
var commandPID = regexp.MustCompile(`\bpid=\d+ ppid=`)

// TestSetattrSameRoot: the root built with mount_setattr(2) has the same
// mounts, with the same options, as the one built by reading the mount
// table and remounting each mount (the path of kernels before 5.12).
func TestSetattrSameRoot(t *testing.T) {
	needIsolation(t)
	dir, extra := t.TempDir(), t.TempDir()
	spec := sandbox.Spec{
		Shell:     "cut -d' ' -f5,6 /proc/self/mountinfo | sort",
		Dir:       dir,
		Scratch:   filepath.Join(t.TempDir(), "scratch"),
		ReadWrite: []string{extra},
		ReadOnly:  []string{"/sys/fs"},
	}
	got := map[bool]string{}
	for _, old := range []bool{false, true} {
		sandbox.SetNoSetattr(old)
		res := run(t, &spec)
		sandbox.SetNoSetattr(false)
		got[old] = res.Output
	}
	if diff := cmp.Diff(got[true], got[false]); diff != "" {
		t.Errorf("with mount_setattr (+), remounting each (-):\n%s", diff)
	}
	if strings.Count(got[false], "\n") < 10 {
		t.Fatalf("too few mounts:\n%s", got[false])
	}
}
