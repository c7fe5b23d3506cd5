package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// A pidsCgroup bounds and collects the processes of one command.
type pidsCgroup struct {
	dir string
	v2  bool
}

var cgroupSeq atomic.Int64

// newPidsCgroup makes a child of this process's pids cgroup (v2 or v1)
// allowing max processes. It fails where cgroups are not writable.
func newPidsCgroup(max int) (*pidsCgroup, error) {
	parent, v2, err := pidsCgroupDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, fmt.Sprintf("hrns-sandbox-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	cg := &pidsCgroup{dir: dir, v2: v2}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		os.Remove(dir)
		return nil, err
	}
	return cg, nil
}

// pidsCgroupDir finds the directory of this process's cgroup that has the
// pids controller: on cgroup v2 where the parent delegates pids to its
// children, else on a v1 pids hierarchy.
func pidsCgroupDir() (dir string, v2 bool, err error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	var v1Path, v2Path string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2Path = parts[2]
		case containsWord(parts[1], "pids"):
			v1Path = parts[2]
		}
	}
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if v2Path == "" {
			break
		}
		d := filepath.Join(root, v2Path)
		ctl, err := os.ReadFile(filepath.Join(d, "cgroup.subtree_control"))
		if err == nil && containsWord(strings.ReplaceAll(string(ctl), " ", ","), "pids") {
			return d, true, nil
		}
	}
	if v1Path != "" {
		d := filepath.Join("/sys/fs/cgroup/pids", v1Path)
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			return d, false, nil
		}
	}
	return "", false, errors.New("no writable pids cgroup")
}

func containsWord(list, w string) bool {
	for _, x := range strings.Split(strings.TrimSpace(list), ",") {
		if x == w {
			return true
		}
	}
	return false
}

// procsFile is the file a process writes its pid to, to join.
func (cg *pidsCgroup) procsFile() string { return filepath.Join(cg.dir, "cgroup.procs") }

// killAll kills every process in the cgroup until it is empty (or a
// bounded number of rounds has passed: new processes cannot outnumber
// pids.max, so each round kills most of what is there).
func (cg *pidsCgroup) killAll() {
	if cg.v2 {
		_ = os.WriteFile(filepath.Join(cg.dir, "cgroup.kill"), []byte("1"), 0)
	}
	for range 1000 {
		b, err := os.ReadFile(cg.procsFile())
		if err != nil || len(strings.TrimSpace(string(b))) == 0 {
			return
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// remove deletes the cgroup once its processes are gone (killed processes
// leave it when they are reaped, which may take a moment).
func (cg *pidsCgroup) remove() error {
	var err error
	for range 200 {
		if err = os.Remove(cg.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		cg.killAll()
		time.Sleep(5 * time.Millisecond)
	}
	return err
}

// sweepPidsCgroups removes the cgroups newPidsCgroup made for processes
// that are gone (the pid in the name is no process's), empty: a zygote's
// is left when the process that started it dies without closing it. A
// cgroup still holding a process is not removed (rmdir refuses), nor one
// whose pid a live process has taken since.
func sweepPidsCgroups() {
	parent, _, err := pidsCgroupDir()
	if err != nil {
		return
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "hrns-sandbox-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.Remove(filepath.Join(parent, e.Name()))
		}
	}
}
