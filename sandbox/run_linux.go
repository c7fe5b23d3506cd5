package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
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
// alone.
var noNetns bool

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
// killed: background processes do not outlive it.
func Run(ctx context.Context, spec *Spec) (*Result, error) {
	p, err := prepare(spec)
	if err != nil {
		return nil, err
	}
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
	spec    *Spec
	dir     string
	cfg     helperConfig
	timeout time.Duration
	grace   time.Duration
	max     int
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
	if fi, err := os.Stat(p.dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: Dir %s is not a directory", ErrInvalidSpec, spec.Dir)
	}
	p.cfg.ReadWrite = append(p.cfg.ReadWrite, p.dir)
	scratch := ""
	if spec.Scratch != "" {
		if scratch, err = filepath.Abs(spec.Scratch); err != nil {
			return nil, fmt.Errorf("%w: Scratch: %w", ErrInvalidSpec, err)
		}
		if err := os.MkdirAll(scratch, 0o700); err != nil {
			return nil, fmt.Errorf("%w: Scratch: %w", ErrInvalidSpec, err)
		}
		p.cfg.ReadWrite = append(p.cfg.ReadWrite, scratch)
	}
	p.cfg.ReadOnly = append(p.cfg.ReadOnly, systemReadOnly...)
	for _, ro := range spec.ReadOnly {
		a, err := filepath.Abs(ro)
		if err != nil {
			return nil, fmt.Errorf("%w: ReadOnly: %w", ErrInvalidSpec, err)
		}
		p.cfg.ReadOnly = append(p.cfg.ReadOnly, a)
	}
	p.cfg.ReadWrite = append(p.cfg.ReadWrite, systemReadWrite...)
	for _, rw := range spec.ReadWrite {
		a, err := filepath.Abs(rw)
		if err != nil {
			return nil, fmt.Errorf("%w: ReadWrite: %w", ErrInvalidSpec, err)
		}
		if _, err := os.Stat(a); err != nil {
			return nil, fmt.Errorf("%w: ReadWrite: %w", ErrInvalidSpec, err)
		}
		p.cfg.ReadWrite = append(p.cfg.ReadWrite, a)
	}
	p.cfg.Env = environ(spec.Env, scratch)
	p.cfg.DenyNet = !spec.AllowNetwork
	p.cfg.Unconfined = spec.Unconfined
	p.cfg.Require = spec.RequireConfinement
	l := spec.Limits
	if l.CPUTime > 0 {
		p.cfg.CPU = uint64((l.CPUTime + time.Second - 1) / time.Second)
	}
	p.cfg.AS, p.cfg.FSize = l.AddressSpace, l.FileSize
	return p, nil
}

// run starts the helper, waits for the command, and cleans up.
func (p *prepared) run(ctx context.Context, cg *pidsCgroup) (*Result, error) {
	netns := p.cfg.DenyNet && !p.cfg.Unconfined && !noNetns
	cmd, pipes, err := p.start(netns)
	if err != nil && netns {
		// No network namespace here (no privilege, user namespaces
		// off): Landlock alone denies TCP.
		cmd, pipes, err = p.start(false)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	start := time.Now()
	pgid := cmd.Process.Pid

	go func() {
		json.NewEncoder(pipes.config).Encode(p.cfg)
		pipes.config.Close()
	}()
	statusDone := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(pipes.status)
		pipes.status.Close()
		statusDone <- b
	}()
	out, kept := output(p.spec, p.max)
	outDone := make(chan struct{})
	go func() {
		io.Copy(out, pipes.output)
		close(outDone)
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	// The status pipe closes when the helper execs the command (it is
	// close-on-exec) or exits. The timeout is the command's: it starts
	// then, so a helper slow to set up (a loaded machine) never has its
	// report cut off by the command's deadline.
	var status []byte
	setup := time.NewTimer(max(p.timeout, helperSetupTimeout))
	select {
	case status = <-statusDone:
	case <-ctx.Done():
	case <-setup.C:
	}
	setup.Stop()
	if status == nil {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waitDone
		pipes.output.Close()
		<-outDone
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the sandbox helper did not finish setting up in %v", ErrStart, max(p.timeout, helperSetupTimeout))
	}

	tctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	timedOut, held := false, false
	select {
	case <-waitDone:
		if d := p.spec.WaitDelay; d > 0 {
			// Background processes holding the output may still
			// write for a while.
			t := time.NewTimer(d)
			select {
			case <-outDone:
			case <-t.C:
				held = true
			case <-tctx.Done():
				held = true
			}
			t.Stop()
		}
	case <-tctx.Done():
		timedOut = true
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		grace := time.NewTimer(p.grace)
		select {
		case <-waitDone:
		case <-grace.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			if cg != nil {
				cg.killAll()
			}
			<-waitDone
		}
		grace.Stop()
	}
	duration := time.Since(start)
	// Nothing the command started outlives it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if cg != nil {
		cg.killAll()
	}
	drain := time.NewTimer(drainTimeout)
	select {
	case <-outDone:
	case <-drain.C:
		pipes.output.Close()
		<-outDone
	}
	drain.Stop()
	pipes.output.Close()

	conf, err := parseStatus(status)
	if err != nil {
		return nil, err
	}
	if p.spec.Limits.Processes > 0 && conf.Processes == "" {
		conf.Processes = "none"
		conf.Notes = append(conf.Notes, "the process count is not bounded: no writable pids cgroup, and RLIMIT_NPROC does not bind root")
	}
	res := &Result{
		TimedOut:    timedOut,
		OutputHeld:  held,
		Confinement: *conf,
		Duration:    duration,
	}
	res.Output, res.OutputBytes = kept()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		res.ExitCode, res.Signal, res.SignalNumber = -1, ws.Signal().String(), int(ws.Signal())
	} else {
		res.ExitCode = ws.ExitStatus()
	}
	return res, nil
}

type helperPipes struct {
	config, status, output *os.File
}

// start starts the helper with its pipes, in a new network namespace if
// netns is set.
func (p *prepared) start(netns bool) (*exec.Cmd, *helperPipes, error) {
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
		return nil, nil, err
	}
	statR, statW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"hrns-sandbox"},
		Env:        []string{helperEnv + "=" + helperMark},
		Dir:        p.dir,
		Stdin:      p.spec.Stdin,
		Stdout:     outW,
		Stderr:     outW,
		ExtraFiles: []*os.File{cfgR, statW},
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
		// Stdin copying, if any, must not hold Wait once the command
		// is gone.
		WaitDelay: time.Second,
	}
	if netns {
		if os.Geteuid() == 0 {
			cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET
		} else {
			cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
		}
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, nil, err
	}
	cfgR.Close()
	statW.Close()
	outW.Close()
	return cmd, &helperPipes{config: cfgW, status: statR, output: outR}, nil
}

// helperSetupTimeout bounds the helper's setup (re-executing the binary,
// rlimits, cgroup, Landlock) when the command's own timeout is shorter.
const helperSetupTimeout = 30 * time.Second

// parseStatus reads the helper's report.
func parseStatus(b []byte) (*Confinement, error) {
	var conf *Confinement
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var st helperStatus
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			return nil, fmt.Errorf("%w: bad report from the sandbox helper: %q", ErrStart, sc.Text())
		}
		if st.Confinement != nil {
			conf = st.Confinement
		}
		switch {
		case st.NotConfined:
			return nil, fmt.Errorf("%w: %s", ErrNotConfined, st.Error)
		case st.Error != "":
			return nil, fmt.Errorf("%w: %s", ErrStart, st.Error)
		}
	}
	if conf == nil {
		return nil, fmt.Errorf("%w: the sandbox helper did not report (is this binary able to re-execute itself?)", ErrStart)
	}
	return conf, nil
}
