package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// systemReadOnly are the paths every command may read and execute. /etc is
// not among them, only files in it that programs commonly need: the rest
// (shadow, ssh host keys, credentials) stays hidden.
var systemReadOnly = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/proc", "/sys/devices/system/cpu", "/sys/fs/cgroup",
	"/dev/random", "/dev/urandom",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf",
	"/etc/resolv.conf", "/etc/gai.conf", "/etc/localtime", "/etc/timezone",
	"/etc/protocols", "/etc/services", "/etc/mime.types", "/etc/os-release",
	"/etc/debian_version", "/etc/alternatives", "/etc/ssl", "/etc/ca-certificates",
	"/etc/ca-certificates.conf", "/etc/inputrc", "/etc/bash.bashrc", "/etc/profile",
}

// systemReadWrite are the device files every command may write. The rest of
// /dev is out of reach: root owns the disks, and without a capability it
// could still read them if /dev were granted.
var systemReadWrite = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}

// noNetns turns network namespaces off, for tests of Landlock's TCP rules
// alone; noIsolation turns the PID and mount namespaces off, for tests of
// the fallback.
var noNetns, noIsolation bool

// twoStages makes the helper's first stage start the second even where it
// could start the command itself, for tests comparing the two.
var twoStages bool

// noSetattr builds the command's root as on a kernel without
// mount_setattr(2), for tests of that path.
var noSetattr bool

// noNestedUserNS makes a zygote of a user other than root find its
// commands' user namespaces refused, for tests of the Box's fallback.
var noNestedUserNS bool

// helperPath is the binary re-executed as the helper: this one. A
// benchmark may name another build of the same tree (the hrns command) to
// time the product's helper start; nothing else changes it.
var helperPath = "/proc/self/exe"

// noSpecCheck leaves the writable paths unchecked by Run's caller side,
// for tests of the helper's own checks (which a command racing the
// check would meet).
var noSpecCheck bool

// drainTimeout bounds the wait for output once every process of the
// command was killed; only a process that escaped both the process group
// and the cgroup can hold the pipe open that long.
const drainTimeout = time.Second

// Run runs the command of spec, confined, and returns how it ended. A
// command that runs and fails is a Result with a non-zero ExitCode, not an
// error; the error is for a command that could not be run: an invalid spec
// ([ErrInvalidSpec]), one that could not be confined when confinement was
// required ([ErrNotConfined]), or one that could not be started
// ([ErrStart]). When Run returns, every process of the command has been
// killed: background processes do not outlive it; and, when the caller
// runs as root, the files it left set-user-ID or set-group-ID under Dir,
// Scratch and ReadWrite (those whose change time is at or after its start)
// have lost those bits, or, for a file with several names, their name
// there ([Result.SetIDCleared]). Run by another user, a command can only
// make set-ID files of that user, which give no one more than any of the
// user's own programs could, so the walk (a stat of every file under the
// writable paths) is not paid for them.
func Run(ctx context.Context, spec *Spec) (*Result, error) {
	p, err := prepare(spec)
	if err != nil {
		return nil, err
	}
	since := inodeClock()
	res, err := p.runGrouped(ctx)
	// Every process of the command is gone: what it left set-user-ID or
	// set-group-ID in the paths it may write loses those bits, whether
	// it ran or failed midway.
	var cleared []string
	if os.Geteuid() == 0 {
		cleared = clearSetID(p.writable, since)
	}
	if res != nil {
		res.SetIDCleared = cleared
	}
	return res, err
}

// runGrouped runs the prepared command in a pids cgroup when the spec
// bounds its processes.
func (p *prepared) runGrouped(ctx context.Context) (*Result, error) {
	var err error
	spec := p.spec
	var cg *pidsCgroup
	if n := spec.Limits.Processes; n > 0 {
		if cg, err = newPidsCgroup(n); err == nil {
			p.cfg.Cgroup = cg.procsFile()
			defer cg.remove()
		} else if os.Geteuid() != 0 {
			p.cfg.NProc = uint64(n)
		}
	}
	return p.run(ctx, cg)
}

// prepared is a validated spec and the helper's config.
type prepared struct {
	spec *Spec
	dir  string
	// writable are the paths the command may write but the devices:
	// Dir, Scratch, ReadWrite.
	writable []string
	cfg      helperConfig
	timeout  time.Duration
	grace    time.Duration
	max      int
}

func prepare(spec *Spec) (*prepared, error) {
	if spec == nil {
		return nil, fmt.Errorf("%w: nil spec", ErrInvalidSpec)
	}
	p := &prepared{spec: spec, timeout: spec.Timeout, grace: spec.Grace, max: spec.MaxOutput}
	if p.timeout <= 0 {
		p.timeout = 10 * time.Minute
	}
	if p.grace <= 0 {
		p.grace = 2 * time.Second
	}
	if p.max <= 0 {
		p.max = 64 << 10
	}
	switch {
	case len(spec.Command) > 0 && spec.Shell != "":
		return nil, fmt.Errorf("%w: both Command and Shell are set", ErrInvalidSpec)
	case len(spec.Command) > 0:
		p.cfg.Argv = append([]string(nil), spec.Command...)
	case spec.Shell != "":
		p.cfg.Argv = []string{"/bin/sh", "-c", spec.Shell}
	default:
		return nil, fmt.Errorf("%w: no Command or Shell", ErrInvalidSpec)
	}
	if spec.Dir == "" {
		return nil, fmt.Errorf("%w: no Dir", ErrInvalidSpec)
	}
	var err error
	if p.dir, err = filepath.Abs(spec.Dir); err != nil {
		return nil, fmt.Errorf("%w: Dir: %w", ErrInvalidSpec, err)
	}
	p.cfg.Dir = p.dir
	p.cfg.ReadWrite = append(p.cfg.ReadWrite, p.dir)
	var extra []string
	for _, rw := range spec.ReadWrite {
		a, err := filepath.Abs(rw)
		if err != nil {
			return nil, fmt.Errorf("%w: ReadWrite: %w", ErrInvalidSpec, err)
		}
		extra = append(extra, a)
	}
	scratch := ""
	if spec.Scratch != "" {
		if scratch, err = filepath.Abs(spec.Scratch); err != nil {
			return nil, fmt.Errorf("%w: Scratch: %w", ErrInvalidSpec, err)
		}
		// Made without following a link below the other writable
		// paths: a command could have left one where Scratch goes.
		regions := writableRegions(append([]string{p.dir}, extra...))
		if err := mkdirGrant(scratch, regions, 0); err != nil {
			if errors.Is(err, ErrLinkBelowWritable) {
				return nil, fmt.Errorf("%w: %w", ErrInvalidSpec, grantError("scratch directory", scratch, err))
			}
			return nil, fmt.Errorf("%w: Scratch: %w", ErrInvalidSpec, err)
		}
		p.cfg.ReadWrite = append(p.cfg.ReadWrite, scratch)
	}
	p.writable = append(slices.Clone(p.cfg.ReadWrite), extra...)
	// Each writable path is checked as the helper will open it (see
	// openGrant), for an early and clear error; the helper checks again
	// when it binds them.
	regions := writableRegions(p.writable)
	for i, w := range p.writable {
		if noSpecCheck {
			break
		}
		what := "read-write path"
		switch {
		case i == 0:
			what = "working directory"
		case w == scratch:
			what = "scratch directory"
		}
		fd, _, _, err := openGrant(w, regions)
		if err != nil {
			if errors.Is(err, ErrLinkBelowWritable) {
				return nil, fmt.Errorf("%w: %w", ErrInvalidSpec, grantError(what, w, err))
			}
			if i == 0 {
				return nil, fmt.Errorf("%w: Dir %s is not a directory", ErrInvalidSpec, spec.Dir)
			}
			return nil, fmt.Errorf("%w: ReadWrite: %w", ErrInvalidSpec, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
		if i == 0 && (err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR) {
			return nil, fmt.Errorf("%w: Dir %s is not a directory", ErrInvalidSpec, spec.Dir)
		}
	}
	p.cfg.ReadOnly = append(p.cfg.ReadOnly, systemReadOnly...)
	for _, ro := range spec.ReadOnly {
		a, err := filepath.Abs(ro)
		if err != nil {
			return nil, fmt.Errorf("%w: ReadOnly: %w", ErrInvalidSpec, err)
		}
		if !noSpecCheck {
			// Missing, it is left out (as by the helper); refused,
			// the command is not run.
			fd, _, _, err := openGrant(a, regions)
			if errors.Is(err, ErrLinkBelowWritable) {
				return nil, fmt.Errorf("%w: %w", ErrInvalidSpec, grantError("read-only path", a, err))
			}
			if err == nil {
				unix.Close(fd)
			}
		}
		p.cfg.ReadOnly = append(p.cfg.ReadOnly, a)
	}
	p.cfg.Writable = p.writable
	p.cfg.ReadWrite = append(append(p.cfg.ReadWrite, systemReadWrite...), extra...)
	for _, o := range spec.Overlays {
		o, err := checkOverlay(o, p.writable, regions)
		if err != nil {
			return nil, fmt.Errorf("%w: Overlays: %w", ErrInvalidSpec, err)
		}
		p.cfg.ReadOnly = append(p.cfg.ReadOnly, o.Lower)
		p.cfg.Overlays = append(p.cfg.Overlays, o)
	}
	p.cfg.Env = environ(spec.Env, scratch)
	p.cfg.DenyNet = !spec.AllowNetwork
	if spec.Proxy != nil {
		switch {
		case spec.AllowNetwork:
			return nil, fmt.Errorf("%w: both AllowNetwork and Proxy are set", ErrInvalidSpec)
		case spec.Proxy.Dial == nil:
			return nil, fmt.Errorf("%w: a Proxy without Dial", ErrInvalidSpec)
		}
	}
	p.cfg.TwoStages = twoStages
	p.cfg.NoSetattr = noSetattr
	p.cfg.PrivateTmp = spec.PrivateTmp
	p.cfg.Terminals = spec.Terminals
	p.cfg.Unconfined = spec.Unconfined
	p.cfg.Require = spec.RequireConfinement
	if spec.RequireIsolation && spec.Unconfined {
		return nil, fmt.Errorf("%w: both Unconfined and RequireIsolation are set", ErrInvalidSpec)
	}
	p.cfg.RequireIsolation = spec.RequireIsolation
	l := spec.Limits
	if l.CPUTime > 0 {
		p.cfg.CPU = uint64((l.CPUTime + time.Second - 1) / time.Second)
	}
	p.cfg.AS, p.cfg.FSize = l.AddressSpace, l.FileSize
	return p, nil
}

// A nsMode is the set of namespaces the helper is started in.
type nsMode int

const (
	nsNone     nsMode = iota
	nsNet             // a network namespace
	nsIsolated        // PID, mount and IPC namespaces, and network if denied
)

// run starts the helper, waits for the command, and cleans up. It tries
// the most isolating namespaces first and falls back, with a note in the
// result, where the kernel refuses them; with RequireIsolation it does
// not fall back, and the command is not run ([ErrNotIsolated]).
func (p *prepared) run(ctx context.Context, cg *pidsCgroup) (*Result, error) {
	netns := p.cfg.DenyNet && !p.cfg.Unconfined && !noNetns
	require := p.cfg.RequireIsolation
	if require && noIsolation {
		return nil, fmt.Errorf("%w: no PID and mount namespaces (turned off for a test); it was not run", ErrNotIsolated)
	}
	var modes []nsMode
	if !p.cfg.Unconfined && !noIsolation {
		modes = append(modes, nsIsolated)
	}
	if netns && !require {
		modes = append(modes, nsNet)
	}
	if !require {
		modes = append(modes, nsNone)
	}
	var err error
	for _, mode := range modes {
		cfg := p.cfg
		cfg.Isolated = mode == nsIsolated
		cfg.NetNS = netns && mode != nsNone
		// The proxy needs the namespace: without it the command has
		// no network at all.
		cfg.Proxy = cfg.NetNS && p.spec.Proxy != nil
		var h *helper
		if h, err = p.start(mode, &cfg); err != nil {
			if mode == nsIsolated {
				p.cfg.NotIsolated = "no PID and mount namespaces: " + err.Error()
				if require {
					return nil, fmt.Errorf("%w: %s; it was not run", ErrNotIsolated, p.cfg.NotIsolated)
				}
			}
			continue
		}
		res, retry, err := p.wait(ctx, h, cg)
		if retry != "" {
			p.cfg.NotIsolated = "the command's root could not be built: " + retry
			if require {
				return nil, fmt.Errorf("%w: %s; it was not run", ErrNotIsolated, p.cfg.NotIsolated)
			}
			continue
		}
		if res != nil && res.Confinement.Isolated {
			isolatedRun.Store(true)
		}
		return res, err
	}
	return nil, fmt.Errorf("%w: %w", ErrStart, err)
}

// A helper is a started sandbox helper.
type helper struct {
	cmd   *exec.Cmd
	pipes *helperPipes
	// proxy is this end of the socket pair over which the first stage
	// hands over the connections to the proxy; nil without one.
	proxy *os.File
}

// wait waits for the command run by h and cleans up. It returns a non-empty
// retry, and no result, when the helper could not build the isolated root.
func (p *prepared) wait(ctx context.Context, h *helper, cg *pidsCgroup) (res *Result, retry string, err error) {
	cmd, pipes := h.cmd, h.pipes
	pgid := cmd.Process.Pid
	if h.proxy != nil {
		// Served until every process of the command is gone; then
		// every connection through it is closed.
		defer serveProxy(h.proxy, p.spec.Proxy).close()
	}

	// The status: the first line when the command starts (or the helper
	// failed), then the command's wait status when it ends.
	first := make(chan []byte, 1)
	exited := make(chan syscall.WaitStatus, 1)
	statusEOF := make(chan struct{})
	var exitStatus *syscall.WaitStatus
	go func() {
		defer close(statusEOF)
		defer pipes.status.Close()
		r := bufio.NewReader(pipes.status)
		n := 0
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				if n == 0 {
					first <- line
				} else {
					var st helperStatus
					if json.Unmarshal(line, &st) == nil && st.Exited != nil {
						ws := syscall.WaitStatus(*st.Exited)
						exitStatus = &ws
						exited <- ws
					}
				}
				n++
			}
			if err != nil {
				if n == 0 {
					close(first)
				}
				return
			}
		}
	}()
	out, kept := output(p.spec, p.max)
	outDone := make(chan struct{})
	go func() {
		io.Copy(out, pipes.output)
		close(outDone)
	}()
	helperDone := make(chan error, 1)
	go func() { helperDone <- cmd.Wait() }()
	// kill ends the helper and, with it, every process of the command:
	// the process group, the PID namespace of which the helper is init,
	// and the cgroup. The helper is reaped before the cgroup is emptied:
	// the kernel ends the death of a namespace's init only once every
	// other process of it is gone, so the cgroup holds then only what
	// left both (nothing, isolated), and killAll finds it empty instead
	// of waiting for the processes just killed to be reaped.
	helperGone := false
	kill := func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if !helperGone {
			<-helperDone
			helperGone = true
		}
		if cg != nil {
			cg.killAll()
		}
	}

	// The timeout is the command's: it starts when the helper reports,
	// so a helper slow to set up (a loaded machine) never has its report
	// cut off by the command's deadline.
	var status []byte
	slow := false
	setup := time.NewTimer(max(p.timeout, helperSetupTimeout))
	select {
	case status = <-first: // nil if the helper ended without a report
	case <-ctx.Done():
	case <-setup.C:
		slow = true
	}
	setup.Stop()
	if status == nil {
		if pipes.stdin != nil {
			pipes.stdin.Close()
		}
		kill()
		pipes.output.Close()
		<-outDone
		switch {
		case ctx.Err() != nil:
			return nil, "", ctx.Err()
		case slow:
			return nil, "", fmt.Errorf("%w: the sandbox helper did not finish setting up in %v", ErrStart, max(p.timeout, helperSetupTimeout))
		}
		return nil, "", fmt.Errorf("%w: the sandbox helper did not report (is this binary able to re-execute itself?)", ErrStart)
	}
	conf, why, err := parseStatus(status)
	if err != nil || why != "" {
		if pipes.stdin != nil {
			pipes.stdin.Close()
		}
		kill()
		pipes.output.Close()
		<-outDone
		return nil, why, err
	}
	if pipes.stdin != nil {
		// Writes fail (EPIPE) once every process of the command is
		// gone; a Reader that blocks keeps this goroutine, as it would
		// keep os/exec's.
		go func() {
			io.Copy(pipes.stdin, p.spec.Stdin)
			pipes.stdin.Close()
		}()
	}
	start := time.Now()

	tctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	timedOut, held := false, false
	select {
	case <-exited:
		// Background processes holding the output may still write for
		// a while.
		held = outputHeld(p.spec.WaitDelay, outDone, tctx.Done())
	case <-helperDone:
		helperGone = true
	case <-tctx.Done():
		timedOut = true
		// The helper passes the signal on to every process of its
		// namespace.
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		grace := time.NewTimer(p.grace)
		select {
		case <-exited:
		case <-helperDone:
			helperGone = true
		case <-grace.C:
		}
		grace.Stop()
	}
	duration := time.Since(start)
	// Nothing the command started outlives it.
	kill()
	drain := time.NewTimer(drainTimeout)
	select {
	case <-outDone:
	case <-drain.C:
		pipes.output.Close()
		<-outDone
	}
	drain.Stop()
	pipes.output.Close()
	<-statusEOF

	if p.spec.Proxy != nil && conf.Network != "namespace+proxy" {
		conf.Notes = append(conf.Notes, "no network namespace for the proxy: the command had no network")
	}
	if p.spec.Limits.Processes > 0 && conf.Processes == "" {
		conf.Processes = "none"
		conf.Notes = append(conf.Notes, "the process count is not bounded: no writable pids cgroup, and RLIMIT_NPROC does not bind root")
	}
	res = &Result{
		TimedOut:    timedOut,
		OutputHeld:  held,
		Confinement: *conf,
		Duration:    duration,
	}
	res.Output, res.OutputBytes = kept()
	// The command's status if the helper reported it, else the helper's
	// own (killed with the command at the timeout).
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if exitStatus != nil {
		ws = *exitStatus
	}
	if ws.Signaled() {
		res.ExitCode, res.Signal, res.SignalNumber = -1, ws.Signal().String(), int(ws.Signal())
	} else {
		res.ExitCode = ws.ExitStatus()
	}
	return res, "", nil
}

type helperPipes struct {
	config, status, output *os.File
	stdin                  *os.File // to copy Spec.Stdin to, or nil
}

// start starts the helper with its pipes, in the namespaces of mode, and
// sends it cfg.
func (p *prepared) start(mode nsMode, cfg *helperConfig) (*helper, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	cfgR, cfgW, err := pipe()
	if err != nil {
		return nil, err
	}
	statR, statW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	// Standard input other than a file is copied only once the command
	// has started (see wait): a helper that fails to set up, and is
	// retried, must not have consumed any of it.
	var stdin io.Reader = p.spec.Stdin
	var stdinR, stdinW *os.File
	if _, isFile := p.spec.Stdin.(*os.File); p.spec.Stdin != nil && !isFile {
		if stdinR, stdinW, err = pipe(); err != nil {
			closeAll()
			return nil, err
		}
		stdin = stdinR
	}
	extra := []*os.File{cfgR, statW}
	var proxyHere *os.File
	if cfg.Proxy {
		// The first stage sends each connection made to its forwarder
		// as one end of a new socket pair, over this one.
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("the proxy's socket pair: %w", err)
		}
		proxyHere = os.NewFile(uintptr(fds[0]), "proxy")
		proxyThere := os.NewFile(uintptr(fds[1]), "proxy")
		files = append(files, proxyThere)
		extra = append(extra, proxyThere)
	}
	cmd := &exec.Cmd{
		Path:       helperPath,
		Args:       []string{"hrns-sandbox"},
		Env:        []string{helperEnv + "=" + helperMark},
		Dir:        p.dir,
		Stdin:      stdin,
		Stdout:     outW,
		Stderr:     outW,
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			// A session of its own: the command has no controlling
			// terminal (it cannot open /dev/tty), and its process
			// group is the session's.
			Setsid:    true,
			Pdeathsig: syscall.SIGKILL,
		},
		// Nothing is copied by os/exec (the standard files are
		// files); this only bounds Wait should that change.
		WaitDelay: time.Second,
	}
	var flags uintptr
	switch mode {
	case nsIsolated:
		flags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC
		if cfg.NetNS {
			flags |= syscall.CLONE_NEWNET
		}
	case nsNet:
		flags = syscall.CLONE_NEWNET
	}
	switch {
	case flags == 0:
	case os.Geteuid() == 0:
		cmd.SysProcAttr.Cloneflags = flags
	case mode == nsIsolated:
		// A user other than root gets a user namespace in which it
		// is root, to build the command's root; the first stage then
		// starts the second in a nested one where it is its own user
		// again, without capabilities.
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | flags
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		cfg.UID, cfg.GID = os.Geteuid(), os.Getegid()
	default:
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | flags
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		if proxyHere != nil {
			proxyHere.Close()
		}
		return nil, err
	}
	cfgR.Close()
	statW.Close()
	outW.Close()
	if len(extra) > 2 {
		extra[2].Close()
	}
	if stdinR != nil {
		stdinR.Close()
	}
	go func() {
		json.NewEncoder(cfgW).Encode(cfg)
		cfgW.Close()
	}()
	return &helper{cmd: cmd, pipes: &helperPipes{config: cfgW, status: statR, output: outR, stdin: stdinW}, proxy: proxyHere}, nil
}

// helperSetupTimeout bounds the helper's setup (re-executing the binary,
// rlimits, cgroup, Landlock) when the command's own timeout is shorter.
const helperSetupTimeout = 30 * time.Second

// parseStatus reads the helper's first report: the confinement, an error,
// or why the isolated root could not be built.
func parseStatus(b []byte) (conf *Confinement, isolationFailed string, err error) {
	var st helperStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, "", fmt.Errorf("%w: bad report from the sandbox helper: %q", ErrStart, b)
	}
	switch {
	case st.IsolationFailed != "":
		return nil, st.IsolationFailed, nil
	case st.NotConfined:
		return nil, "", fmt.Errorf("%w: %s", ErrNotConfined, st.Error)
	case st.NotIsolated:
		return nil, "", fmt.Errorf("%w: %s; it was not run", ErrNotIsolated, st.Error)
	case st.Error != "":
		return nil, "", fmt.Errorf("%w: %s", ErrStart, st.Error)
	case st.Confinement == nil:
		return nil, "", fmt.Errorf("%w: the sandbox helper did not report its confinement", ErrStart)
	}
	return st.Confinement, "", nil
}

// checkOverlay makes o's paths absolute and checks them: all exist as
// directories, none holds a character the overlay's mount options give a
// meaning to, Target and Upper are inside writable paths, and Upper and
// Work are not inside Lower (nor Lower inside them).
func checkOverlay(o Overlay, writable, regions []string) (Overlay, error) {
	paths := []*string{&o.Lower, &o.Upper, &o.Work, &o.Target}
	for _, p := range paths {
		if *p == "" {
			return o, errors.New("an overlay needs Lower, Upper, Work and Target")
		}
		a, err := filepath.Abs(*p)
		if err != nil {
			return o, err
		}
		// Resolved as a granted path: no link followed below a
		// writable path (a Lower a command replaced by a link would
		// show its target).
		fd, real, _, err := openGrant(a, regions)
		if err != nil {
			if errors.Is(err, ErrLinkBelowWritable) {
				return o, grantError("overlay path", a, err)
			}
			return o, err
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
		a = real
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return o, fmt.Errorf("%s is not a directory", a)
		}
		if strings.ContainsAny(a, ",:\\") {
			return o, fmt.Errorf("%s: an overlay's paths cannot hold ',', ':' or '\\'", a)
		}
		*p = a
	}
	inWritable := func(p string) bool {
		return slices.ContainsFunc(writable, func(w string) bool { return within(p, w) })
	}
	if !inWritable(o.Target) || !inWritable(o.Upper) || !inWritable(o.Work) {
		return o, fmt.Errorf("the overlay on %s: Target, Upper and Work must be inside Dir, Scratch or ReadWrite", o.Target)
	}
	for _, p := range []string{o.Upper, o.Work, o.Target} {
		if within(p, o.Lower) || within(o.Lower, p) {
			return o, fmt.Errorf("the overlay on %s: %s and its Lower %s overlap", o.Target, p, o.Lower)
		}
	}
	return o, nil
}

// outputHeld waits up to d (Spec.WaitDelay; 0 waits not at all) for
// outDone, the end of the command's output once every process holding it
// has closed it, and reports whether the output was still held when d
// passed or done (the command's time) came.
func outputHeld(d time.Duration, outDone, done <-chan struct{}) bool {
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-outDone:
		return false
	case <-t.C:
	case <-done:
	}
	return true
}
