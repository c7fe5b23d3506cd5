package browser

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Chromium locks its profile directory with the link SingletonLock
// ("HOST-PID"), beside SingletonSocket and SingletonCookie. A Chromium
// started on a directory whose lock names a live Chromium, or another
// host, does not start ("chrome failed to start"). A kept profile passes
// from browser to browser (a session's runs in hrns serve), so the
// browser that stops waits for its processes to be gone and removes the
// lock they leave (stop), and the one that starts waits for a lock that
// another one still holds to go (awaitProfile), both within bounds.
var singletonFiles = []string{"SingletonLock", "SingletonSocket", "SingletonCookie"}

// Bounds of the waits for a profile's processes and lock.
const (
	// profilePoll is the interval between looks.
	profilePoll = 20 * time.Millisecond
	// goneWait bounds stop's wait for the processes it killed.
	goneWait = 5 * time.Second
	// lockWait bounds launch's wait for another browser's lock.
	lockWait = 30 * time.Second
)

// inUse holds the kept profiles the browsers of this process run on:
// a browser takes its profile when it starts Chromium and gives it up
// once Chromium is gone (stop), so that two browsers on one profile take
// it in turn, and the one stopping kills only its own processes.
var inUse = struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when given up
}{held: map[string]chan struct{}{}}

// takeProfile waits, within lockWait, until no other browser of this
// process runs on the profile dir, and takes it; release gives it up.
func takeProfile(dir string) (release func(), err error) {
	timer := time.NewTimer(lockWait)
	defer timer.Stop()
	mine := make(chan struct{})
	for {
		inUse.mu.Lock()
		held := inUse.held[dir]
		if held == nil {
			inUse.held[dir] = mine
			inUse.mu.Unlock()
			break
		}
		inUse.mu.Unlock()
		select {
		case <-held:
		case <-timer.C:
			return nil, fmt.Errorf("browser: the profile %s is still used by another browser, which did not close within %v", dir, lockWait)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			inUse.mu.Lock()
			delete(inUse.held, dir)
			inUse.mu.Unlock()
			close(mine)
		})
	}, nil
}

// procsUsing lists the processes started with the profile dir.
func procsUsing(dir string) []int {
	want := "--user-data-dir=" + dir + "\x00"
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmdline)+"\x00", want) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// ownProcs lists the processes started with the profile dir that descend
// from this process: this browser's Chromium and its helpers, not another
// process's browser on the same directory (a replica sharing it).
func ownProcs(dir string) []int {
	var own []int
	for _, pid := range procsUsing(dir) {
		if descends(pid, os.Getpid()) {
			own = append(own, pid)
		}
	}
	return own
}

// descends reports whether process pid descends from process ancestor,
// walking at most 64 parents.
func descends(pid, ancestor int) bool {
	for range 64 {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		// "PID (COMM) STATE PPID ...", COMM holding any byte.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			return false
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			return false
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil || ppid <= 1 {
			return false
		}
		if ppid == ancestor {
			return true
		}
		pid = ppid
	}
	return false
}

// killAndWait kills the processes pids, started with the profile dir, and
// waits, within goneWait, until none of them is left (a killed process's
// command line reads empty once it has exited, even before it is reaped,
// and a PID used again names a process without dir). It reports whether
// none is left.
func killAndWait(dir string, pids []int) bool {
	deadline := time.Now().Add(goneWait)
	for {
		left := slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return !slices.Contains(procsUsing(dir), pid) })
		if len(left) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		for _, pid := range left {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
			}
		}
		time.Sleep(profilePoll)
	}
}

// removeLock removes the lock files of the profile dir, which no process
// uses any more.
func removeLock(dir string) {
	for _, name := range singletonFiles {
		os.Remove(filepath.Join(dir, name))
	}
}

// removeOwnLock removes the profile dir's lock if it names one of the
// processes own of this host, which are gone: not a lock another
// browser (a replica sharing the directory) took since.
func removeOwnLock(dir string, own []int) {
	self, _ := os.Hostname()
	if host, pid, ok := lockHolder(dir); ok && host == self && slices.Contains(own, pid) {
		removeLock(dir)
	}
}

// lockHolder reads the profile dir's lock: the host and process that
// hold it, ok false when there is none (or it is not a lock).
func lockHolder(dir string) (host string, pid int, ok bool) {
	target, err := os.Readlink(filepath.Join(dir, "SingletonLock"))
	if err != nil {
		return "", 0, false
	}
	i := strings.LastIndexByte(target, '-')
	if i < 0 {
		return "", 0, false
	}
	pid, err = strconv.Atoi(target[i+1:])
	if err != nil {
		return "", 0, false
	}
	return target[:i], pid, true
}

// awaitProfile waits, within lockWait, for the profile dir to be free of
// another browser: no process of this host started with it, and no lock
// naming a live process of it or another host (a browser on a replica
// that shares the directory, which removes its lock when it stops). A
// lock naming a process of this host that is gone is stale and removed;
// what is left at the bound is taken over: this host's processes killed,
// another host's lock removed, and an error only if processes outlive
// their killing.
func awaitProfile(dir string) error {
	self, _ := os.Hostname()
	deadline := time.Now().Add(lockWait)
	for {
		pids := procsUsing(dir)
		host, _, locked := lockHolder(dir)
		if len(pids) == 0 && (!locked || host == self) {
			if locked {
				removeLock(dir) // stale: its process is gone
			}
			return nil
		}
		if time.Now().After(deadline) {
			if !killAndWait(dir, pids) {
				return fmt.Errorf("browser: the profile %s is still used by a browser that does not end", dir)
			}
			removeLock(dir)
			return nil
		}
		time.Sleep(profilePoll)
	}
}
