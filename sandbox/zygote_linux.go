package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// zygoteFD is a zygote's control socket (SOCK_SEQPACKET): the caller
// sends a zygoteRequest per message, the zygote a zygoteReply.
const zygoteFD = 5

// zygoteRequest is what a Box sends its zygote. "run" comes with three
// descriptors: the command's standard input, its output, and a pipe from
// which the zygote reads the command (a zygoteCommand, of any size).
// "signal" sends Signal to every process of the command; "end" kills
// them all and answers Clean once they are reaped.
type zygoteRequest struct {
	Op     string `json:"op"`
	Signal int    `json:"signal,omitempty"`
}

// zygoteCommand is the program, arguments and environment of one command.
type zygoteCommand struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// zygoteReply is what a zygote answers: Took, then Started (or Error), to "run",
// Exited when the command's own process ends, Clean to "end".
type zygoteReply struct {
	// Took: the zygote has the command (sent first, before it reads
	// the command or starts it): a zygote that ends before it sends
	// this has run nothing of it.
	Took    bool   `json:"took,omitempty"`
	Started bool   `json:"started,omitempty"`
	Error   string `json:"error,omitempty"`
	Exited  *int   `json:"exited,omitempty"`
	Clean   bool   `json:"clean,omitempty"`
	// Retire, with Clean: the zygote exits now (see cpuSpent and
	// restoreLimits); the next command needs another.
	Retire bool `json:"retire,omitempty"`
}

// zygoteReapTimeout bounds the wait for the processes of a command killed
// at its end; a zygote that cannot reap them in that time exits, and
// with it, as the PID namespace's init, all of them.
const zygoteReapTimeout = 10 * time.Second

// serveZygote is a zygote's first stage once its root is built: on a
// thread of its own it confines itself as startCommand does (no
// capabilities to pass on, no_new_privs, Landlock, the keyrings' filter)
// and reports the confinement; then it starts each command the control
// socket sends, from that thread, in a session of its own and an IPC
// namespace of its own (and, for a user other than root, a user
// namespace of its own: see forkInUserNS), with the command's limits, one
// at a time. Each
// command ends with an "end" that kills every other process of the PID
// namespace (of which this process is init) and reaps them, so that
// nothing of one command is there when the next starts. It exits when
// the control socket closes (its Box closed it, or the caller died),
// killing whatever runs. It never returns.
func serveZygote(status *os.File, cfg *helperConfig) {
	fail := func(st helperStatus) {
		writeStatus(status, st)
		os.Exit(127)
	}
	if !zygoteStage(cfg) || !cfg.Rooted {
		fail(helperStatus{Error: "a zygote needs the isolated root and one stage"})
	}
	// Every signal a command may send (it may reach this process through
	// the confined thread, whose Landlock domain is its own) is taken and
	// dropped: by the Go runtime's defaults a SIGTERM, SIGQUIT or SIGILL
	// would end the zygote. The caller ends it with SIGKILL. Handled, not
	// ignored: each command starts with them at their default.
	signal.Notify(make(chan os.Signal, 1))
	// Not dumpable: its threads but the confined one keep root's
	// capabilities, and a command must never read or write their memory.
	// The ptrace check on capabilities keeps the commands out already
	// (the confined thread keeps its permitted set); this makes
	// CAP_SYS_PTRACE necessary as well (TestBoxZygoteNotDumpable). Each
	// command's exec makes it dumpable again, as any program.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail(helperStatus{Error: "prctl(PR_SET_DUMPABLE): " + err.Error()})
	}
	ctl := zygoteFD
	var sendMu sync.Mutex
	send := func(r zygoteReply) {
		b, _ := json.Marshal(r)
		sendMu.Lock()
		defer sendMu.Unlock()
		if _, err := unix.Write(ctl, b); err != nil {
			os.Exit(1) // the caller is gone
		}
	}
	// Standard files: nothing of the caller's (the commands get theirs).
	if null, err := os.OpenFile("/dev/null", os.O_RDWR, 0); err == nil {
		for fd := range 3 {
			_ = unix.Dup2(int(null.Fd()), fd)
		}
		null.Close()
	}

	type start struct {
		cmd   zygoteCommand
		files []int // stdin, output
		pid   chan int
		err   chan error
	}
	starts := make(chan start)
	limits := make(chan []savedLimit, 1)
	// outside runs what the confined thread asks of the others: writing
	// a command's ID maps, which Landlock keeps from it (see
	// forkInUserNS).
	outside := make(chan func())
	go func() {
		for f := range outside {
			f()
		}
	}()
	fork := func(c zygoteCommand, files []int) (int, error) {
		return forkCommand(cfg, c, files, outside)
	}
	go func() {
		runtime.LockOSThread() // never unlocked
		if os.Geteuid() == 0 {
			_ = dropCapabilities()
		}
		conf, _ := confine(cfg, fail, restrictThread)
		if err := closeOnExecFrom(3); err != nil {
			fail(helperStatus{Confinement: &conf, Error: "closing inherited descriptors: " + err.Error()})
		}
		if cfg.UID != 0 {
			// Each command enters a user namespace of its own, as
			// Run's second stage does: found out now, not at the
			// first command, so that the Box runs its commands as
			// Run does where the kernel refuses it.
			if err := probeUserNS(cfg, outside); err != nil {
				fail(helperStatus{Confinement: &conf, Error: "a user namespace for each command: " + err.Error()})
			}
		}
		writeStatus(status, helperStatus{Confinement: &conf})
		status.Close()
		// The limits are the process's, as the first stage's are when
		// it starts the command itself (see oneStage): each command
		// takes them at fork. They bind this process too: its address
		// space has the headroom oneStage asks, it writes no file, and
		// its own processor time is kept under half the command's
		// (see cpuSpent).
		// RLIMIT_NPROC (a user other than root without a pids
		// cgroup) is each command's alone, set on it before it runs
		// (see forkInUserNS): it counts the processes of its user
		// namespace, and would bind this process's threads.
		noNProc := *cfg
		noNProc.NProc = 0
		setLimits(&noNProc)
		limits <- saveLimits()
		for s := range starts {
			pid, err := fork(s.cmd, s.files)
			if err != nil {
				s.err <- err
				continue
			}
			s.pid <- pid
		}
	}()

	var (
		running  bool
		allGone  chan struct{}
		buf      = make([]byte, 4096)
		oob      = make([]byte, unix.CmsgSpace(3*4))
		overlays = cfg.OverlaysMounted
		saved    []savedLimit
	)
	killAll := func() {
		_ = syscall.Kill(-1, syscall.SIGKILL)
		if allGone != nil {
			select {
			case <-allGone:
			case <-time.After(zygoteReapTimeout):
				os.Exit(1)
			}
		}
		allGone, running = nil, false
	}
	for {
		n, oobn, _, _, err := unix.Recvmsg(ctl, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		var fds []int
		if err == nil && oobn > 0 {
			if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
				for _, m := range msgs {
					if rights, perr := unix.ParseUnixRights(&m); perr == nil {
						fds = append(fds, rights...)
					}
				}
			}
		}
		if err != nil || n == 0 {
			killAll()
			os.Exit(0) // the caller closed the socket, or is gone
		}
		var req zygoteRequest
		if json.Unmarshal(buf[:n], &req) != nil {
			closeFDs(fds)
			killAll()
			os.Exit(1)
		}
		switch req.Op {
		case "run":
			send(zygoteReply{Took: true})
			if running || len(fds) != 3 {
				closeFDs(fds)
				send(zygoteReply{Error: "a zygote runs one command at a time, with its three descriptors"})
				continue
			}
			cmd, err := readCommand(fds[2])
			unix.Close(fds[2])
			if err == nil && len(cfg.Overlays) > 0 {
				err = remountOverlays(cfg, overlays)
			}
			if err != nil {
				closeFDs(fds[:2])
				send(zygoteReply{Error: err.Error()})
				continue
			}
			// The limits each command takes are the spec's, whatever
			// a command before set (see restoreLimits).
			if saved == nil {
				saved = <-limits
			}
			if !restoreLimits(saved) {
				closeFDs(fds[:2])
				send(zygoteReply{Error: "the zygote's limits were changed and could not be restored"})
				continue
			}
			s := start{cmd: cmd, files: fds[:2], pid: make(chan int, 1), err: make(chan error, 1)}
			starts <- s
			var pid int
			select {
			case pid = <-s.pid:
			case err = <-s.err:
			}
			closeFDs(fds[:2])
			if err != nil {
				send(zygoteReply{Error: err.Error()})
				continue
			}
			running = true
			allGone = make(chan struct{})
			// Started before Exited: the reaper starts once it is sent.
			send(zygoteReply{Started: true})
			go reapCommand(pid, allGone, send)
		case "signal":
			closeFDs(fds)
			if running && req.Signal > 0 {
				_ = syscall.Kill(-1, syscall.Signal(req.Signal))
			}
		case "end":
			closeFDs(fds)
			killAll()
			// A command may have changed the zygote's limits: if they
			// cannot all be set back, the next command needs another.
			restored := saved == nil || restoreLimits(saved)
			if !restored || cfg.CPU > 0 && cpuSpent() > time.Duration(cfg.CPU)*time.Second/2 {
				send(zygoteReply{Clean: true, Retire: true})
				os.Exit(0)
			}
			send(zygoteReply{Clean: true})
		default:
			closeFDs(fds)
			killAll()
			os.Exit(1)
		}
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// maxZygoteCommand bounds a command's program, arguments and environment
// as read by a zygote.
const maxZygoteCommand = 64 << 20

// readCommand reads one command from the pipe fd.
func readCommand(fd int) (zygoteCommand, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return zygoteCommand{}, err
	}
	f := os.NewFile(uintptr(dup), "command")
	defer f.Close()
	var c zygoteCommand
	if err := json.NewDecoder(io.LimitReader(f, maxZygoteCommand)).Decode(&c); err != nil {
		return c, fmt.Errorf("reading the command: %w", err)
	}
	if len(c.Argv) == 0 {
		return c, errors.New("no command")
	}
	return c, nil
}

// remountOverlays mounts each overlay afresh over the one the last
// command used: its lower layer may have changed since, which a mounted
// overlay does not follow. want is how many the zygote mounted at first.
//
// Each is unmounted by a descriptor of its Target opened without
// following a link: a Target lies in a path the commands write, and a
// command (of another zygote, at any time) may put a link on the way to
// it, which unmount(2) by name would follow, unmounting what the link
// names. One that cannot be opened so is not unmounted (and the mount
// below refuses it too).
func remountOverlays(cfg *helperConfig, want int) error {
	return remountOverlaysAt(cfg, "/", want)
}

// remountOverlaysAt is remountOverlays with the root at root.
func remountOverlaysAt(cfg *helperConfig, root string, want int) error {
	staging, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the root: %w", err)
	}
	for _, o := range cfg.Overlays {
		fd, err := openDirNoLinks(staging, o.Target)
		if err != nil {
			continue
		}
		_ = unix.Unmount("/proc/self/fd/"+strconv.Itoa(fd), unix.MNT_DETACH)
		unix.Close(fd)
	}
	unix.Close(staging)
	c := *cfg
	c.OverlaysMounted, c.OverlayNotes = 0, nil
	if err := mountOverlaysAt(&c, root); err != nil {
		return err
	}
	if c.OverlaysMounted != want {
		return fmt.Errorf("the overlays could not be mounted again: %v", c.OverlayNotes)
	}
	return nil
}

// forkCommand starts one command from the confined thread, which it must
// be called on: the command inherits the thread's Landlock domain,
// seccomp filter and (empty) bounding set, and the process's limits. For
// a user other than root (cfg.UID set) it enters a user namespace of its
// own (see forkInUserNS); outside runs what the other threads must do.
func forkCommand(cfg *helperConfig, cmd zygoteCommand, files []int, outside chan<- func()) (int, error) {
	path, err := lookPath(cmd.Argv[0], cmd.Env)
	if err != nil {
		return 0, err
	}
	attr := &syscall.ProcAttr{
		Dir:   cfg.Dir,
		Env:   cmd.Env,
		Files: []uintptr{uintptr(files[0]), uintptr(files[1]), uintptr(files[1])},
		Sys: &syscall.SysProcAttr{
			// No controlling terminal, a process group of its own;
			// and System V IPC objects of its own, gone with it.
			Setsid:     true,
			Cloneflags: syscall.CLONE_NEWIPC,
		},
	}
	var pid int
	if cfg.UID != 0 {
		pid, err = forkInUserNS(cfg, path, cmd.Argv, attr, outside, false)
	} else {
		pid, err = syscall.ForkExec(path, cmd.Argv, attr)
	}
	if err != nil {
		return 0, fmt.Errorf("starting %s: %w", cmd.Argv[0], err)
	}
	return pid, nil
}

// forkInUserNS starts a command of a user other than root in a user
// namespace of its own, nested in the zygote's, where it is its user
// again (cfg.UID, cfg.GID) without a capability, as Run's second stage
// is: the zygote is root in its own user namespace, with every
// capability there, and a command started there would keep them (or,
// with the bounding set dropped, still be root in it).
//
// The maps of the new namespace cannot be written from the confined
// thread, whose Landlock domain (the command's) lets nothing in /proc be
// written; nor by the command, in the same domain. So the command stops
// before its first instruction, traced by the confined thread
// (PTRACE_TRACEME, then the stop at its exec: the exec gave it no
// capability, its user being unmapped, with no_new_privs and an empty
// inheritable set), and another thread of the zygote, outside the domain,
// writes its maps (and RLIMIT_NPROC, for the command alone: the count is
// of its user namespace's processes); the confined thread then detaches
// it, and it runs. A command that cannot be so set up is killed before it
// runs.
//
// probe: the command is killed once set up, and forkInUserNS returns 0.
func forkInUserNS(cfg *helperConfig, path string, argv []string, attr *syscall.ProcAttr, outside chan<- func(), probe bool) (int, error) {
	sys := *attr.Sys
	// CLONE_VM and CLONE_VFORK, which syscall adds itself but for a new
	// user namespace (whose maps its parent writes while the child
	// waits, here not asked): the child shares this process's memory,
	// as for root, until its exec, instead of a copy of it, which cost
	// several times the rest of the command's start (and grew with the
	// zygote's heap).
	sys.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_VM | syscall.CLONE_VFORK
	sys.Ptrace = true
	a := *attr
	a.Sys = &sys
	pid, err := syscall.ForkExec(path, argv, &a)
	if err != nil {
		return 0, err
	}
	kill := func(err error) (int, error) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		for {
			if _, werr := syscall.Wait4(pid, &ws, syscall.WALL, nil); !errors.Is(werr, syscall.EINTR) {
				break
			}
		}
		return 0, err
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, syscall.WALL, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	switch {
	case err != nil:
		return kill(fmt.Errorf("waiting for it to stop at its start: %w", err))
	case !ws.Stopped():
		// Ended (killed) before it ran: reaped.
		return 0, fmt.Errorf("it ended at its start (status %#x)", int(ws))
	case ws.StopSignal() != syscall.SIGTRAP:
		return kill(fmt.Errorf("it stopped at its start with %v, not SIGTRAP", ws.StopSignal()))
	}
	done := make(chan error, 1)
	outside <- func() { done <- setUpUserNS(pid, cfg) }
	if err := <-done; err != nil || probe {
		return kill(err)
	}
	// Detached without a signal: the SIGTRAP of its exec is dropped.
	if err := syscall.PtraceDetach(pid); err != nil {
		return kill(fmt.Errorf("detaching it: %w", err))
	}
	return pid, nil
}

// setUpUserNS writes the ID maps of the user namespace of process pid,
// stopped before it runs (see forkInUserNS): cfg.UID and cfg.GID map to
// the zygote's root, which is the caller's user outside; setgroups is
// denied, as Run's second stage has it. It sets RLIMIT_NPROC for the
// command where cfg.NProc says. It is called on a thread outside the
// commands' Landlock domain.
func setUpUserNS(pid int, cfg *helperConfig) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	for _, w := range []struct{ file, data string }{
		{"setgroups", "deny"},
		{"gid_map", fmt.Sprintf("%d 0 1\n", cfg.GID)},
		{"uid_map", fmt.Sprintf("%d 0 1\n", cfg.UID)},
	} {
		fd, err := unix.Open(dir+w.file, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("its %s: %w", w.file, err)
		}
		_, err = unix.Write(fd, []byte(w.data))
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("writing its %s: %w", w.file, err)
		}
	}
	if cfg.NProc > 0 {
		l := unix.Rlimit{Cur: cfg.NProc, Max: cfg.NProc}
		if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, &l, nil); err != nil {
			return fmt.Errorf("its RLIMIT_NPROC: %w", err)
		}
	}
	return nil
}

// probeUserNS checks, on the confined thread, that a command can be
// started as forkInUserNS starts it: the kernel, a seccomp filter, Yama
// or an LSM may refuse the user namespace, the trace of its start or the
// writing of its maps. The probe is /bin/sh, killed once set up, before
// its first instruction; where there is none, a program that is not
// there, which checks what comes before the exec.
func probeUserNS(cfg *helperConfig, outside chan<- func()) error {
	if cfg.NoNestedUserNS {
		return errors.New("refused for a test")
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(null)
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Files: []uintptr{uintptr(null), uintptr(null), uintptr(null)},
		Sys:   &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWIPC},
	}
	path := "/bin/sh"
	if _, err := os.Stat(path); err != nil {
		path = "/nonexistent/hrns-sandbox-probe"
	}
	pid, err := forkInUserNS(cfg, path, []string{"probe"}, attr, outside, true)
	switch {
	case err == nil && pid == 0:
		return nil // stopped, set up and killed
	case errors.Is(err, syscall.ENOENT) && path != "/bin/sh":
		return nil
	case err == nil:
		return errors.New("the probe ran")
	}
	return err
}

// reapCommand reaps every process of the namespace (all are this
// process's children or orphans adopted by it) until none is left,
// reports the command's own end, and then closes allGone.
func reapCommand(pid int, allGone chan struct{}, send func(zygoteReply)) {
	defer close(allGone)
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return // no child left
		}
		if p == pid {
			w := int(ws)
			send(zygoteReply{Exited: &w})
		}
	}
}

// savedLimit is one resource limit of the zygote, as saveLimits read it.
type savedLimit struct {
	resource int
	limit    unix.Rlimit
}

// saveLimits returns every resource limit of this process that it can
// read.
func saveLimits() []savedLimit {
	var l []savedLimit
	for r := range unix.RLIMIT_RTTIME + 1 { // RLIM_NLIMITS
		var v unix.Rlimit
		if unix.Prlimit(0, r, nil, &v) == nil {
			l = append(l, savedLimit{r, v})
		}
	}
	return l
}

// restoreLimits sets this process's limits back to l (see saveLimits),
// and reports whether they are all l's again. A command runs as the
// zygote's user, and prlimit(2) lets a process change the limits of
// another of its user (any thread of it) without a capability: a command
// may lower the zygote's limits, or raise a soft one up to its hard one,
// and the next command would inherit them. Raising a hard limit back
// needs CAP_SYS_RESOURCE, which the zygote may lack (root without it, in
// a container; the zygote of another user, which holds it in its user
// namespace only, where it does not count for this): a zygote whose
// limits cannot be restored ends.
func restoreLimits(l []savedLimit) bool {
	ok := true
	for _, s := range l {
		var now unix.Rlimit
		if unix.Prlimit(0, s.resource, nil, &now) == nil && now == s.limit {
			continue
		}
		_ = unix.Prlimit(0, s.resource, &s.limit, nil)
		if unix.Prlimit(0, s.resource, nil, &now) != nil || now != s.limit {
			ok = false
		}
	}
	return ok
}

// cpuSpent is the processor time this process has used: a zygote ends
// once it has used half the command's RLIMIT_CPU, which binds it too.
func cpuSpent() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
