package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of a Box's zygotes.
const (
	// boxMaxZygotes bounds the zygotes of one Box: its commands at
	// once that run in one; more run as [Run] runs them.
	boxMaxZygotes = 4
	// boxMaxCommands bounds the commands one zygote runs; the next
	// gets a new one.
	boxMaxCommands = 1000
)

// boxIdleNs, if set (by a test), is how long an idle zygote is kept, in
// nanoseconds, instead of boxIdle's minute.
var boxIdleNs atomic.Int64

// boxIdle is how long an idle zygote is kept.
func boxIdle() time.Duration {
	if d := boxIdleNs.Load(); d > 0 {
		return time.Duration(d)
	}
	return time.Minute
}

// A Box runs the commands of one sandbox: a spec whose paths, network,
// limits and confinement stay the same from one command to the next (one
// workspace of one owner). Where it can, it runs them in a zygote: a
// helper started once, in its namespaces, with its root built and its
// Landlock rules applied, that starts each command as a child of its own
// instead of starting a helper for each; a command then costs about what
// os/exec costs. The confinement is the same as [Run]'s, with these
// differences, all of them between commands of the same Box:
//
//   - The commands share the network namespace, and (Landlock's) domain:
//     a command's processes are all killed at its end, so what the next
//     command meets there is what the spec gave the first.
//   - Each command has an IPC namespace and a session of its own; the
//     PID namespace and its /proc are the zygote's, which runs one
//     command at a time and, at each command's end, kills and reaps
//     every process of it but itself.
//   - Scratch, when set, holds a directory for each zygote (and one for
//     each command run as Run runs it), which is the commands' Scratch
//     (their TMPDIR): emptied after each command, removed with its
//     zygote. Each overlay is mounted afresh before each command.
//
// Run by a user other than root, a command is what Run's second stage
// makes it: that user again, without a capability, in a user namespace of
// its own nested in the zygote's, which is root in a user namespace of its
// own as Run's first stage is. The zygote's confined thread cannot write
// the nested namespace's ID maps (its Landlock domain, the command's,
// writes nothing in /proc): the command is started traced, and another
// thread of the zygote writes them, and its RLIMIT_NPROC without a pids
// cgroup (the count of that namespace's processes, the command's), while
// it is stopped at its exec, before its first instruction (see
// forkInUserNS).
//
// A zygote is used only where it confines as Run would: isolated (PID,
// mount and IPC namespaces; for a user other than root, the kernel must
// also let the confined thread start each command in a user namespace of
// its own and trace its start, which a zygote checks when it starts),
// without a Proxy, PrivateTmp, Terminals or Unconfined, and with an
// address-space limit that leaves the helper's runtime room (see
// zygoteStage); elsewhere every command runs as Run runs it. A zygote
// serves one command at a time: up to four run at once in zygotes, more
// as Run runs them. A zygote idle for a minute, or that has run a
// thousand commands, exits; one that dies is replaced for the next
// command (a command it was running ends with an error), and one whose
// caller dies is killed (the parent-death signal, and the end of its
// control socket).
//
// A Box must be closed; it is safe for concurrent use.
type Box struct {
	spec    Spec   // the sandbox: the per-command fields are zero
	scratch string // Scratch, absolute; emptied after each command
	perCall string // why commands do not run in a zygote; "" if they may

	mu     sync.Mutex
	idle   []*zygote
	live   int
	closed bool
	timer  *time.Timer
}

// NewBox returns a Box for the sandbox of spec: all of it but Command,
// Shell, Env, Stdin, Timeout, Grace, MaxOutput, Output, WaitDelay and
// RequireIsolation, which each command given to [Box.Run] sets. It checks the spec as Run
// would, and starts nothing yet.
func NewBox(spec *Spec) (*Box, error) {
	if spec == nil {
		return nil, fmt.Errorf("%w: nil spec", ErrInvalidSpec)
	}
	t := boxTemplate(spec)
	c := t
	c.Shell = "true"
	if _, err := prepare(&c); err != nil {
		return nil, err
	}
	b := &Box{spec: t, perCall: boxPerCall(&t)}
	if t.Scratch != "" {
		b.scratch, _ = filepath.Abs(t.Scratch)
	}
	return b, nil
}

// boxTemplate is s without its per-command fields.
func boxTemplate(s *Spec) Spec {
	t := *s
	t.Command, t.Shell, t.Env, t.Stdin = nil, "", nil, nil
	t.Timeout, t.Grace, t.MaxOutput, t.Output, t.WaitDelay = 0, 0, 0, nil, 0
	// Each command's own: one run in a zygote is isolated, and one run
	// as Run runs it is refused if it cannot be.
	t.RequireIsolation = false
	return t
}

// sameBox reports whether two templates are the same sandbox.
func sameBox(a, b *Spec) bool {
	return a.Dir == b.Dir && a.Scratch == b.Scratch &&
		slices.Equal(a.ReadOnly, b.ReadOnly) && slices.Equal(a.ReadWrite, b.ReadWrite) &&
		slices.Equal(a.Overlays, b.Overlays) && a.PrivateTmp == b.PrivateTmp &&
		a.Terminals == b.Terminals && a.AllowNetwork == b.AllowNetwork && a.Proxy == b.Proxy &&
		a.Limits == b.Limits && a.Unconfined == b.Unconfined && a.RequireConfinement == b.RequireConfinement
}

// boxPerCall says why the commands of t cannot run in a zygote; "" if
// they can.
func boxPerCall(t *Spec) string {
	switch {
	case t.Unconfined:
		return "unconfined"
	case t.Proxy != nil:
		return "a proxy serves one command"
	case t.PrivateTmp || t.Terminals:
		return "a private /tmp and terminals are one command's"
	case noIsolation || noNetns || twoStages || noSpecCheck:
		return "turned off for a test"
	}
	return ""
}

// Run runs the command of spec in the Box's sandbox and returns how it
// ended, as [Run] does. The spec's sandbox (all but its per-command
// fields: see [NewBox]) must be the Box's, else Run fails with
// [ErrInvalidSpec]. A command run in a zygote is isolated; one run as Run
// runs it (the zygote could not start, or the Box's commands cannot use
// one) is held to its spec's RequireIsolation as by Run: with it, a
// command that cannot be isolated is refused with [ErrNotIsolated], not
// run. When it returns, every process of the command has
// been killed, the set-ID bits it left are cleared as by Run, and its
// Scratch (a directory in the Box's) is empty.
func (b *Box) Run(ctx context.Context, spec *Spec) (*Result, error) {
	if spec == nil {
		return nil, fmt.Errorf("%w: nil spec", ErrInvalidSpec)
	}
	if t := boxTemplate(spec); !sameBox(&t, &b.spec) {
		return nil, fmt.Errorf("%w: the spec's sandbox is not the box's", ErrInvalidSpec)
	}
	// A zygote dead while idle is found when it is sent the command:
	// another then takes it.
	for range 2 {
		z, start, err := b.take()
		if err != nil {
			return nil, err
		}
		if z == nil && !start {
			break
		}
		res, retry, err := b.runIn(ctx, spec, z)
		if !retry {
			return res, err
		}
	}
	return b.runPerCall(ctx, spec)
}

// scratchFor is the Scratch of a command, in the Box's Scratch: a
// directory of its zygote's, or one of its own (kind "run").
func (b *Box) scratchFor(kind string) string {
	if b.scratch == "" {
		return ""
	}
	return filepath.Join(b.scratch, fmt.Sprintf("%s-%d", kind, boxSeq.Add(1)))
}

var boxSeq atomic.Int64

// runPerCall runs the command as Run does, with a Scratch of its own,
// removed after it.
func (b *Box) runPerCall(ctx context.Context, spec *Spec) (*Result, error) {
	s := *spec
	s.Scratch = b.scratchFor("run")
	p, err := prepare(&s)
	if err != nil {
		return nil, err
	}
	defer removeGranted(s.Scratch, p.writable, true)
	since := inodeClock()
	res, err := p.runGrouped(ctx)
	if os.Geteuid() == 0 {
		if cleared := clearSetID(p.writable, since); res != nil {
			res.SetIDCleared = cleared
		}
	}
	return res, err
}

// runIn runs the command in z, or in a zygote it starts (z nil). retry:
// no zygote took it, and it did not run.
func (b *Box) runIn(ctx context.Context, spec *Spec, z *zygote) (res *Result, retry bool, err error) {
	s := *spec
	if z != nil {
		s.Scratch = z.scratch
	} else {
		s.Scratch = b.scratchFor("zygote")
	}
	p, err := prepare(&s)
	if err != nil {
		if z != nil {
			// Its Scratch may be what was refused: the next
			// command gets another zygote.
			b.give(z, false)
		} else {
			b.unreserve("")
			removeGranted(s.Scratch, nil, true)
		}
		return nil, false, err
	}
	if z == nil {
		var perCall string
		if z, perCall, err = startZygote(ctx, p); err != nil {
			b.unreserve(perCall)
			removeGranted(s.Scratch, p.writable, true)
			return nil, true, nil
		}
		z.scratch, z.writable = s.Scratch, p.writable
	}
	since := inodeClock()
	res, healthy, started, err := z.run(ctx, p)
	// Every process of the command is gone (run returns once the
	// zygote has reaped them, or has itself been killed and reaped):
	// as Run, whether it ran or failed midway.
	if os.Geteuid() == 0 {
		if cleared := clearSetID(p.writable, since); res != nil {
			res.SetIDCleared = cleared
		}
	}
	// Each command finds it empty, as a new one; a zygote whose Scratch
	// could not be emptied (more entries than removeGranted's bound)
	// ends, and the next command gets another, with a Scratch of its own.
	full := removeGranted(z.scratch, p.writable, false)
	b.give(z, healthy && !full)
	if !started && !healthy && ctx.Err() == nil {
		return nil, true, nil
	}
	return res, false, err
}

// removeGranted removes what is in dir, and dir too if all: dir is
// reached as a granted path is (see openGrant), nothing in it is
// followed, and a dir a command replaced by a link is left as it is
// (the next command naming it is refused). It reports whether it left
// entries in dir past its bound (removeRounds batches of 1,024 names at
// dir's top): a command may have made any number.
func removeGranted(dir string, writable []string, all bool) (full bool) {
	if dir == "" {
		return false
	}
	regions := writableRegions(writable)
	fd, _, _, err := openGrant(dir, regions)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	root, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return false
	}
	defer root.Close()
	// A batch at a time, a bounded number of batches; then one more
	// look, to tell whether any is left.
	for i := 0; ; i++ {
		d, err := root.Open(".")
		if err != nil {
			return false
		}
		names, _ := d.Readdirnames(1024)
		d.Close()
		if len(names) == 0 {
			break
		}
		if i == removeRounds {
			return true
		}
		for _, n := range names {
			_ = root.RemoveAll(n)
		}
	}
	if !all {
		return false
	}
	pfd, _, _, err := openGrant(filepath.Dir(dir), regions)
	if err != nil {
		return false
	}
	defer unix.Close(pfd)
	_ = unix.Unlinkat(pfd, filepath.Base(dir), unix.AT_REMOVEDIR)
	return false
}

// removeRounds bounds removeGranted's batches (a variable for a test).
var removeRounds = 1000

// take returns an idle zygote, or start set when the caller may start
// one (a slot is then reserved: see unreserve), or neither when the
// command is to run as Run runs it.
func (b *Box) take() (z *zygote, start bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false, fmt.Errorf("%w: the box is closed", ErrInvalidSpec)
	}
	if b.perCall != "" {
		return nil, false, nil
	}
	if n := len(b.idle); n > 0 {
		z = b.idle[n-1]
		b.idle = b.idle[:n-1]
		return z, false, nil
	}
	if b.live >= boxMaxZygotes {
		return nil, false, nil
	}
	b.live++
	return nil, true, nil
}

// unreserve gives back a slot taken to start a zygote that did not
// start; perCall, if set, is why none will.
func (b *Box) unreserve(perCall string) {
	b.mu.Lock()
	b.live--
	if perCall != "" {
		b.perCall = perCall
	}
	b.mu.Unlock()
}

// give takes back a zygote that ran a command: kept if healthy, else
// closed.
func (b *Box) give(z *zygote, healthy bool) {
	z.commands++
	b.mu.Lock()
	if !healthy || b.closed || z.commands >= boxMaxCommands {
		b.live--
		b.mu.Unlock()
		z.close()
		return
	}
	z.idleSince = time.Now()
	b.idle = append(b.idle, z)
	if b.timer == nil {
		b.timer = time.AfterFunc(boxIdle(), b.closeIdle)
	}
	b.mu.Unlock()
}

// closeIdle closes the zygotes idle for boxIdle() or longer, and comes
// back while any remain.
func (b *Box) closeIdle() {
	b.mu.Lock()
	var old []*zygote
	keep := b.idle[:0]
	for _, z := range b.idle {
		if time.Since(z.idleSince) >= boxIdle() {
			old = append(old, z)
		} else {
			keep = append(keep, z)
		}
	}
	b.idle = keep
	b.live -= len(old)
	b.timer = nil
	if len(b.idle) > 0 && !b.closed {
		b.timer = time.AfterFunc(boxIdle(), b.closeIdle)
	}
	b.mu.Unlock()
	for _, z := range old {
		z.close()
	}
}

// Close ends the Box's zygotes: the idle ones now, each busy one when its
// command ends. Run then fails. It returns once the idle zygotes have
// exited.
func (b *Box) Close() error {
	b.mu.Lock()
	b.closed = true
	idle := b.idle
	b.idle = nil
	b.live -= len(idle)
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
	for _, z := range idle {
		z.close()
	}
	return nil
}

// A zygote is a started zygote helper.
type zygote struct {
	cmd     *exec.Cmd
	conn    *net.UnixConn
	replies chan zygoteReply // closed when the socket ends
	dead    chan struct{}    // closed when the helper has exited
	cg      *pidsCgroup
	conf    Confinement

	commands  int
	idleSince time.Time
	// scratch is the zygote's Scratch (in the Box's), writable the
	// writable paths of its spec: removed when it ends.
	scratch  string
	writable []string
}

// startZygote starts a zygote for the prepared spec and reads its
// confinement. perCall is set when the spec's commands cannot run in one
// (the namespaces or the root were refused), so that the Box stops
// trying.
func startZygote(ctx context.Context, p *prepared) (z *zygote, perCall string, err error) {
	cfg := p.cfg
	cfg.Isolated, cfg.Zygote = true, true
	cfg.NoNestedUserNS = noNestedUserNS
	cfg.NetNS = cfg.DenyNet
	z = &zygote{replies: make(chan zygoteReply, 4), dead: make(chan struct{})}
	if n := p.spec.Limits.Processes; n > 0 {
		sweepPidsCgroups()
		if z.cg, err = newPidsCgroup(n); err == nil {
			cfg.Cgroup = z.cg.procsFile()
		} else if os.Geteuid() != 0 {
			// As Run bounds them: set on each command (see
			// forkInUserNS), whose user namespace it counts.
			cfg.NProc = uint64(n)
		}
	}
	fail := func(err error) (*zygote, string, error) {
		if z.cg != nil {
			z.cg.killAll()
			z.cg.remove()
		}
		return nil, perCall, err
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	files = append(files, cfgR, cfgW)
	statR, statW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	files = append(files, statR, statW)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	here, there := os.NewFile(uintptr(fds[0]), "zygote"), os.NewFile(uintptr(fds[1]), "zygote")
	files = append(files, here, there)
	flags := uintptr(syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC)
	if cfg.NetNS {
		flags |= syscall.CLONE_NEWNET
	}
	var uidMap, gidMap []syscall.SysProcIDMap
	if os.Geteuid() != 0 {
		// As Run's first stage: root in a user namespace of its own,
		// to build the root; each command then enters one nested in
		// it, where it is this user again (see forkInUserNS).
		flags |= syscall.CLONE_NEWUSER
		uidMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		gidMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		cfg.UID, cfg.GID = os.Geteuid(), os.Getegid()
	}
	cmd := &exec.Cmd{
		Path:       helperPath,
		Args:       []string{"hrns-sandbox"},
		Env:        []string{helperEnv + "=" + helperMark},
		Dir:        p.dir,
		ExtraFiles: []*os.File{cfgR, statW, there},
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:      true,
			Pdeathsig:   syscall.SIGKILL,
			Cloneflags:  flags,
			UidMappings: uidMap,
			GidMappings: gidMap,
		},
		WaitDelay: time.Second,
	}
	if err := startOnLockedThread(cmd); err != nil {
		perCall = "no PID and mount namespaces: " + err.Error()
		return fail(err)
	}
	z.cmd = cmd
	go func() {
		cmd.Wait()
		close(z.dead)
	}()
	kill := func() {
		_ = cmd.Process.Kill()
		<-z.dead
	}
	cfgR.Close()
	statW.Close()
	there.Close()
	go func() {
		json.NewEncoder(cfgW).Encode(cfg)
		cfgW.Close()
	}()
	first := make(chan []byte, 1)
	go func() {
		b := make([]byte, 0, 4096)
		buf := make([]byte, 4096)
		for len(b) < 1<<20 {
			n, err := statR.Read(buf)
			b = append(b, buf[:n]...)
			if i := slices.Index(b, '\n'); i >= 0 {
				first <- b[:i+1]
				return
			}
			if err != nil {
				break
			}
		}
		first <- nil
	}()
	setup := time.NewTimer(helperSetupTimeout)
	defer setup.Stop()
	var status []byte
	select {
	case status = <-first:
	case <-ctx.Done():
	case <-setup.C:
	}
	if status == nil {
		kill()
		return fail(fmt.Errorf("%w: the sandbox's zygote did not report", ErrStart))
	}
	conf, why, err := parseStatus(status)
	if err == nil && why == "" && !conf.Isolated {
		why = "not isolated"
	}
	if err != nil || why != "" {
		kill()
		if why != "" {
			perCall = "the command's root could not be built: " + why
			err = errors.New(why)
		} else {
			// Its report (no Landlock where it is required...)
			// would be every zygote's: Run reports it per command.
			perCall = "the zygote did not start: " + err.Error()
		}
		return fail(err)
	}
	c, err := net.FileConn(here)
	if err != nil {
		kill()
		return fail(err)
	}
	z.conn = c.(*net.UnixConn)
	if p.spec.Limits.Processes > 0 && conf.Processes == "" {
		conf.Processes = "none"
		conf.Notes = append(conf.Notes, "the process count is not bounded: no writable pids cgroup, and RLIMIT_NPROC does not bind root")
	}
	z.conf = *conf
	isolatedRun.Store(true)
	go z.read()
	return z, "", nil
}

// read passes the zygote's replies on, until its socket ends.
func (z *zygote) read() {
	defer close(z.replies)
	buf := make([]byte, 4096)
	for {
		n, err := z.conn.Read(buf)
		if err != nil || n == 0 {
			return
		}
		var r zygoteReply
		if json.Unmarshal(buf[:n], &r) != nil {
			return
		}
		z.replies <- r
	}
}

// send sends a request, with descriptors.
func (z *zygote) send(req zygoteRequest, files ...*os.File) error {
	b, _ := json.Marshal(req)
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	z.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, _, err := z.conn.WriteMsgUnix(b, oob, nil)
	return err
}

// close ends the zygote: the end of its socket makes it kill what runs and
// exit; it is killed if it has not within a few seconds.
func (z *zygote) close() {
	z.conn.Close()
	select {
	case <-z.dead:
	case <-time.After(5 * time.Second):
		_ = z.cmd.Process.Kill()
		<-z.dead
	}
	if z.cg != nil {
		z.cg.killAll()
		z.cg.remove()
	}
	removeGranted(z.scratch, z.writable, true)
}

// run runs the prepared command in the zygote. healthy: the zygote may run
// another; started: the command was started (or refused by the zygote,
// which is then healthy), so that a failure is the command's, not one to
// retry in another zygote.
func (z *zygote) run(ctx context.Context, p *prepared) (res *Result, healthy, started bool, err error) {
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, true, true, fmt.Errorf("%w: %w", ErrStart, err)
	}
	files = append(files, outR, outW)
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, true, true, fmt.Errorf("%w: %w", ErrStart, err)
	}
	files = append(files, reqR, reqW)
	var stdin, stdinW *os.File
	switch f, isFile := p.spec.Stdin.(*os.File); {
	case p.spec.Stdin == nil:
		if stdin, err = os.Open(os.DevNull); err != nil {
			return nil, true, true, fmt.Errorf("%w: %w", ErrStart, err)
		}
		files = append(files, stdin)
	case isFile:
		stdin = f
	default:
		if stdin, stdinW, err = os.Pipe(); err != nil {
			return nil, true, true, fmt.Errorf("%w: %w", ErrStart, err)
		}
		files = append(files, stdin, stdinW)
	}
	if err := z.send(zygoteRequest{Op: "run"}, stdin, outW, reqR); err != nil {
		// Not taken (a zygote that died while idle): another may
		// run it.
		return nil, false, false, err
	}
	outW.Close()
	reqR.Close()
	go func() {
		json.NewEncoder(reqW).Encode(zygoteCommand{Argv: p.cfg.Argv, Env: p.cfg.Env})
		reqW.Close()
	}()
	out, kept := output(p.spec, p.max)
	outDone := make(chan struct{})
	go func() {
		io.Copy(out, outR)
		close(outDone)
	}()
	drain := func() {
		t := time.NewTimer(drainTimeout)
		select {
		case <-outDone:
		case <-t.C:
			outR.Close()
			<-outDone
		}
		t.Stop()
	}
	// abandon kills the zygote, and with it the command.
	abandon := func() {
		_ = z.cmd.Process.Kill()
		<-z.dead
		drain()
	}

	setup := time.NewTimer(max(p.timeout, helperSetupTimeout))
	defer setup.Stop()
	var first zygoteReply
	var ok bool
	took := false
	for !took || (ok && first.Took) {
		select {
		case first, ok = <-z.replies:
		case <-ctx.Done():
			abandon()
			return nil, false, true, ctx.Err()
		case <-setup.C:
			abandon()
			return nil, false, true, fmt.Errorf("%w: the sandbox's zygote did not start the command in %v", ErrStart, max(p.timeout, helperSetupTimeout))
		}
		if !ok && !took {
			// It ended before it had the command (one killed
			// while idle, still exiting): another may run it.
			abandon()
			return nil, false, false, fmt.Errorf("%w: the sandbox's zygote ended", ErrStart)
		}
		if !ok {
			break
		}
		took = took || first.Took
	}
	switch {
	case !ok:
		// It took the command, and ended: it may have started it.
		abandon()
		return nil, false, true, errors.New("sandbox: the zygote ended before it reported the command's start; the command may have run in part")
	case first.Error != "":
		drain()
		return nil, true, true, fmt.Errorf("%w: %s", ErrStart, first.Error)
	case !first.Started:
		abandon()
		return nil, false, true, fmt.Errorf("%w: a bad reply from the sandbox's zygote", ErrStart)
	}
	if stdinW != nil {
		stdin.Close()
		go func() {
			io.Copy(stdinW, p.spec.Stdin)
			stdinW.Close()
		}()
		files = slices.DeleteFunc(files, func(f *os.File) bool { return f == stdinW })
	}
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()

	var exited *int
	gone := false // the zygote's socket ended
	timedOut, held := false, false
	wait := func(t <-chan struct{}) bool { // true: the command exited
		for exited == nil && !gone {
			select {
			case r, ok := <-z.replies:
				if !ok {
					gone = true
				} else if r.Exited != nil {
					exited = r.Exited
				}
			case <-t:
				return false
			}
		}
		return exited != nil
	}
	if !wait(tctx.Done()) && !gone {
		timedOut = true
		if z.send(zygoteRequest{Op: "signal", Signal: int(syscall.SIGTERM)}) != nil {
			gone = true
		} else {
			gctx, gcancel := context.WithTimeout(context.Background(), p.grace)
			wait(gctx.Done())
			gcancel()
		}
	}
	if exited != nil && !timedOut {
		held = outputHeld(p.spec.WaitDelay, outDone, tctx.Done())
	}
	duration := time.Since(start)
	// Nothing the command started outlives it.
	clean, retire := false, false
	if !gone && z.send(zygoteRequest{Op: "end"}) == nil {
		t := time.NewTimer(zygoteReapTimeout + 5*time.Second)
	reaped:
		for {
			select {
			case r, ok := <-z.replies:
				if !ok {
					break reaped
				}
				if r.Exited != nil {
					exited = r.Exited
				}
				if r.Clean {
					clean = true
					retire = r.Retire
					break reaped
				}
			case <-t.C:
				break reaped
			}
		}
		t.Stop()
	}
	if !clean {
		abandon()
		if exited == nil {
			return nil, false, true, errors.New("sandbox: the zygote running the command ended before it")
		}
	} else {
		drain()
	}
	res = &Result{TimedOut: timedOut, OutputHeld: held, Duration: duration, Confinement: z.conf}
	res.Confinement.Notes = slices.Clone(z.conf.Notes)
	res.Output, res.OutputBytes = kept()
	var ws syscall.WaitStatus
	if exited != nil {
		ws = syscall.WaitStatus(*exited)
	}
	switch {
	case exited == nil:
		res.ExitCode, res.Signal, res.SignalNumber = -1, syscall.SIGKILL.String(), int(syscall.SIGKILL)
	case ws.Signaled():
		res.ExitCode, res.Signal, res.SignalNumber = -1, ws.Signal().String(), int(ws.Signal())
	default:
		res.ExitCode = ws.ExitStatus()
	}
	return res, clean && !retire, true, nil
}

// starts runs the starts of zygotes on one thread, locked to its
// goroutine and never given back: a child's parent-death signal comes
// when the thread that started it ends, not the process, and the Go
// runtime may end other threads.
var starts = sync.OnceValue(func() chan func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread()
		for f := range ch {
			f()
		}
	}()
	return ch
})

// startOnLockedThread starts cmd from the thread of starts.
func startOnLockedThread(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	starts() <- func() { done <- cmd.Start() }
	return <-done
}
