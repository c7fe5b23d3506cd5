//go:build linux

package sandbox

import "time"

// SetNoNetns turns network namespaces off (or back on) for a test.
func SetNoNetns(b bool) { noNetns = b }

// SetNoIsolation turns the PID and mount namespaces off (or back on) for a
// test.
func SetNoIsolation(b bool) { noIsolation = b }

// SetTwoStages makes the helper start its second stage even where the
// first could start the command itself.
func SetTwoStages(b bool) { twoStages = b }

// SetNoSetattr makes the helper build the command's root as on a kernel
// without mount_setattr(2).
func SetNoSetattr(b bool) { noSetattr = b }

// SetNoNestedUserNS makes a zygote of a user other than root find its
// commands' user namespaces refused.
func SetNoNestedUserNS(b bool) { noNestedUserNS = b }

// SetNoSpecCheck leaves the granted paths unchecked before the helper
// starts, so that a test reaches the helper's own checks.
func SetNoSpecCheck(b bool) { noSpecCheck = b }

// SetHelperPath makes Run re-execute path as the helper instead of this
// binary: another build of the same tree (for a benchmark of the hrns
// command's helper start). "" restores this binary.
func SetHelperPath(path string) {
	if path == "" {
		path = "/proc/self/exe"
	}
	helperPath = path
}

// BoxZygotes returns the process IDs of a Box's idle zygotes.
func BoxZygotes(b *Box) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var pids []int
	for _, z := range b.idle {
		pids = append(pids, z.cmd.Process.Pid)
	}
	return pids
}

// BoxPerCall says why a Box runs its commands as Run does, or "" if it
// runs them in zygotes.
func BoxPerCall(b *Box) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.perCall
}

// PidsCgroupParent is the cgroup directory Run makes its pids cgroups in,
// or "" where it makes none.
func PidsCgroupParent() string {
	d, _, err := pidsCgroupDir()
	if err != nil {
		return ""
	}
	return d
}

// SetBoxIdle sets how long a Box keeps an idle zygote; 0 restores a
// minute.
func SetBoxIdle(d time.Duration) { boxIdleNs.Store(int64(d)) }

// SetRemoveRounds sets the bound on the batches of names a Box removes
// from a command's Scratch (1,000 of 1,024), and returns a func that sets
// it back.
func SetRemoveRounds(n int) func() {
	old := removeRounds
	removeRounds = n
	return func() { removeRounds = old }
}
