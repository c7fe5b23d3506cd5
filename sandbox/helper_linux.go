package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// helperEnv marks the re-executed binary as the sandbox helper; its value
// says which of the helper's two stages it is.
const helperEnv = "HRNS_SANDBOX_HELPER"

const (
	// helperMark is the first stage, the command's init: it sets up the
	// namespaces and the root, starts the second stage and reaps.
	helperMark = "v2"
	// execMark is the second stage: it applies Landlock and the limits,
	// and execs the command.
	execMark = "v2-exec"
)

// The helper's file descriptors: the config to read, the status to write,
// and, with a proxy, the socket to hand connections to the proxy over.
const (
	configFD = 3
	statusFD = 4
	proxyFD  = 5
)

// helperConfig is what the parent tells the helper.
type helperConfig struct {
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir"`
	ReadOnly  []string `json:"ro"`
	ReadWrite []string `json:"rw"`
	// Writable are the paths the command may write but the devices
	// (Dir, Scratch, ReadWrite): no link is followed below them (see
	// openGrant).
	Writable   []string `json:"writable"`
	DenyNet    bool     `json:"deny_net"`
	Unconfined bool     `json:"unconfined"`
	Require    bool     `json:"require"`
	// RequireIsolation: the command runs only in its own root (see
	// Spec.RequireIsolation); without one, confine refuses it.
	RequireIsolation bool      `json:"require_isolation,omitempty"`
	Cgroup           string    `json:"cgroup,omitempty"` // cgroup.procs file to join
	CPU              uint64    `json:"cpu,omitempty"`    // seconds
	AS               uint64    `json:"as,omitempty"`
	FSize            uint64    `json:"fsize,omitempty"`
	NProc            uint64    `json:"nproc,omitempty"`
	Overlays         []Overlay `json:"overlays,omitempty"`

	// Set by the parent: the namespaces the helper was started in.
	NetNS bool `json:"netns,omitempty"`
	// Proxy: the network is reached through the parent's proxy, over
	// the socket at proxyFD (set only with NetNS).
	Proxy bool `json:"proxy,omitempty"`
	// ProxyPort is set by the first stage for the second: the port its
	// forwarder listens on at 127.0.0.1.
	ProxyPort int  `json:"proxy_port,omitempty"`
	Isolated  bool `json:"isolated,omitempty"` // PID, mount and IPC namespaces
	// Set by the parent for a user other than root, whose first stage is
	// root in a user namespace: the user to be again in the second.
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
	// Set by the first stage for the second: the root was built, with
	// this many of the overlays mounted (and why the others were not).
	Rooted          bool     `json:"rooted,omitempty"`
	OverlaysMounted int      `json:"overlays_mounted,omitempty"`
	OverlayNotes    []string `json:"overlay_notes,omitempty"`
	// PrivateTmp: a tmpfs of its own at /tmp (Spec.PrivateTmp).
	PrivateTmp bool `json:"private_tmp,omitempty"`
	// Terminals: a devpts instance of its own (Spec.Terminals).
	Terminals bool `json:"terminals,omitempty"`
	// TwoStages: the first stage starts the second even where it could
	// start the command itself (see oneStage); for tests.
	TwoStages bool `json:"two_stages,omitempty"`
	// NoSetattr: the root is built as on a kernel without
	// mount_setattr(2); for tests.
	NoSetattr bool `json:"no_setattr,omitempty"`
	// NoNestedUserNS: a zygote of a user other than root finds its
	// commands' user namespaces refused, as on a kernel that refuses
	// them (see probeUserNS); for tests.
	NoNestedUserNS bool `json:"no_nested_userns,omitempty"`
	// Zygote: the helper starts no command of its own but serves the
	// commands its control socket sends, one at a time (see
	// serveZygote).
	Zygote bool `json:"zygote,omitempty"`
	// Set by the parent when an isolated start failed: why.
	NotIsolated string `json:"not_isolated,omitempty"`
}

// helperStatus is what the helper tells the parent, one JSON object per
// line: the confinement before exec (or an error), then, from the first
// stage, how the command ended.
type helperStatus struct {
	Confinement *Confinement `json:"confinement,omitempty"`
	Error       string       `json:"error,omitempty"`
	NotConfined bool         `json:"not_confined,omitempty"`
	// NotIsolated: isolation was required and the command was not
	// isolated; it was not run.
	NotIsolated bool `json:"not_isolated,omitempty"`
	// IsolationFailed: the namespaces were made but the root could not
	// be built; the parent retries without them.
	IsolationFailed string `json:"isolation_failed,omitempty"`
	// Exited carries the command's wait status once it has ended.
	Exited *int `json:"exited,omitempty"`
}

func init() {
	switch os.Getenv(helperEnv) {
	case helperMark:
		runInit() // does not return
	case execMark:
		runExec() // does not return
	}
}

func writeStatus(f *os.File, st helperStatus) {
	b, _ := json.Marshal(st)
	f.Write(append(b, '\n'))
}

// readConfig reads the helper's config from its descriptor.
func readConfig(status *os.File) helperConfig {
	cfgFile := os.NewFile(configFD, "config")
	var cfg helperConfig
	if err := json.NewDecoder(cfgFile).Decode(&cfg); err != nil {
		writeStatus(status, helperStatus{Error: "reading the sandbox config: " + err.Error()})
		os.Exit(127)
	}
	cfgFile.Close()
	return cfg
}

// runInit is the first stage. Started by the parent in new namespaces (when
// the kernel allows), it is the command's init (PID 1): it joins the pids
// cgroup, builds the command's root, drops root's capabilities and starts
// the second stage (or, see oneStage, does its work and starts the
// command), then reaps every process of the namespace and reports how the
// command ended. It never returns.
func runInit() {
	runtime.LockOSThread()
	status := os.NewFile(statusFD, "status")
	fail := func(st helperStatus) {
		writeStatus(status, st)
		os.Exit(127)
	}
	// Nothing this process inherited besides its standard files, its
	// config and its status reaches the second stage, nor the command.
	if err := closeOnExecFrom(statusFD + 1); err != nil {
		fail(helperStatus{Error: "closing inherited descriptors: " + err.Error()})
	}
	cfg := readConfig(status)
	if cfg.Cgroup != "" {
		// Before the root is built: the cgroup file system is read-only
		// there. The pid is this namespace's: the kernel translates it.
		if err := os.WriteFile(cfg.Cgroup, []byte(fmt.Sprint(os.Getpid())), 0); err != nil {
			fail(helperStatus{Error: "joining the pids cgroup: " + err.Error()})
		}
	}
	if cfg.Isolated {
		if err := buildRoot(&cfg); err != nil {
			if errors.Is(err, ErrLinkBelowWritable) {
				// Refused, not to be retried without the root.
				fail(helperStatus{Error: err.Error()})
			}
			fail(helperStatus{IsolationFailed: err.Error()})
		}
		cfg.Rooted = true
	} else {
		// Orphans come to this process rather than to the host's
		// init, so that it reaps them.
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	if cfg.Proxy {
		// Before the capabilities go: bringing the loopback up needs
		// CAP_NET_ADMIN in the namespace.
		port, err := startForwarder(os.NewFile(proxyFD, "proxy"))
		if err != nil {
			fail(helperStatus{Error: "the network proxy's forwarder: " + err.Error()})
		}
		cfg.ProxyPort = port
		cfg.Env = proxyEnv(cfg.Env, port)
	}
	if os.Geteuid() == 0 {
		// A failure shows in the second stage, which reports it.
		_ = dropCapabilities()
	}
	if cfg.Zygote {
		serveZygote(status, &cfg) // does not return
	}
	if oneStage(&cfg) {
		reap(status, &cfg, startCommand(status, &cfg))
	}

	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		fail(helperStatus{Error: "config pipe: " + err.Error()})
	}
	go func() {
		json.NewEncoder(cfgW).Encode(cfg)
		cfgW.Close()
	}()
	// This process's standard files become the command's; it gives its
	// own up once the command has them, so that the output ends when
	// the command's processes are gone.
	attr := &os.ProcAttr{
		Dir:   cfg.Dir,
		Env:   []string{helperEnv + "=" + execMark},
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, cfgR, status},
	}
	if cfg.UID != 0 {
		attr.Sys = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: cfg.UID, HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: cfg.GID, HostID: 0, Size: 1}},
		}
	}
	child, err := os.StartProcess("/proc/self/exe", []string{"hrns-sandbox"}, attr)
	if err != nil {
		fail(helperStatus{Error: "starting the sandbox's second stage: " + err.Error()})
	}
	cfgR.Close()
	reap(status, &cfg, child)
}

// reap gives up this process's standard files to the command it started,
// relays the parent's signals to every process of the namespace, reaps
// them, and reports how the command ended. It never returns.
func reap(status *os.File, cfg *helperConfig, child *os.Process) {
	if null, err := os.OpenFile("/dev/null", os.O_RDWR, 0); err == nil {
		for fd := range 3 {
			_ = unix.Dup2(int(null.Fd()), fd)
		}
		null.Close()
	}

	// Signals from the parent (the timeout's SIGTERM) reach every
	// process of the namespace, even one that left the process group.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			if cfg.Isolated {
				_ = syscall.Kill(-1, s.(syscall.Signal))
			} else {
				_ = syscall.Kill(child.Pid, s.(syscall.Signal))
			}
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			// No children left.
			os.Exit(0)
		}
		if pid == child.Pid {
			w := int(ws)
			writeStatus(status, helperStatus{Exited: &w})
		}
	}
}

// runExec is the second stage: it applies Landlock and the limits, reports
// the confinement and execs the command. It never returns: on failure it
// reports on the status pipe and exits with 127.
func runExec() {
	// Landlock and no_new_privs are per-thread until exec: do everything
	// on the thread that execs.
	runtime.LockOSThread()
	status := os.NewFile(statusFD, "status")
	syscall.CloseOnExec(statusFD)
	fail := func(st helperStatus) {
		writeStatus(status, st)
		os.Exit(127)
	}
	cfg := readConfig(status)
	conf, path := confine(&cfg, fail, restrictProcess)
	// The command gets its standard files and nothing else: a
	// descriptor open here would give it a file or socket beyond its
	// paths.
	if err := closeOnExecFrom(3); err != nil {
		fail(helperStatus{Confinement: &conf, Error: "closing inherited descriptors: " + err.Error()})
	}
	writeStatus(status, helperStatus{Confinement: &conf})

	// The limits come last: the address-space limit could starve the Go
	// runtime of this helper.
	setLimits(&cfg)
	err := syscall.Exec(path, cfg.Argv, cfg.Env)
	fail(helperStatus{Error: fmt.Sprintf("exec %s: %v", cfg.Argv[0], err)})
}

// oneStage reports whether the first stage may start the command itself,
// confined and limited as the second stage would: the command's user is
// this process's (no nested user namespace to enter, whose ID maps this
// process could not write once Landlock confines it), no RLIMIT_NPROC is
// to be set (which would also bind this process's start of the command),
// and the address-space limit, which binds this process too from then
// on, leaves its Go runtime at least asHeadroom above what it maps now.
// Applying Landlock and the limits here is what the second stage did,
// one execution of this binary earlier: this process then only reaps,
// relays signals and reports, on descriptors it holds already.
func oneStage(cfg *helperConfig) bool {
	if cfg.UID != 0 || cfg.NProc != 0 || cfg.TwoStages {
		return false
	}
	return asFits(cfg)
}

// zygoteStage reports whether a zygote may start the commands itself, as
// oneStage for the first stage, but for the user and RLIMIT_NPROC: a
// zygote puts each command of a user other than root in a nested user
// namespace itself, and sets its RLIMIT_NPROC on the command alone (see
// forkInUserNS).
func zygoteStage(cfg *helperConfig) bool {
	return !cfg.TwoStages && (cfg.NProc == 0 || cfg.UID != 0) && asFits(cfg)
}

// asFits reports whether the address-space limit, taken by this process
// too, leaves its Go runtime asHeadroom above what it maps now.
func asFits(cfg *helperConfig) bool {
	if cfg.AS == 0 {
		return true
	}
	vm, err := mappedBytes()
	return err == nil && cfg.AS >= vm+asHeadroom
}

// asHeadroom is the address space the first stage keeps beyond what it
// maps when it takes the command's limit for itself: its Go runtime
// maps about 1.2 GiB at start (mostly reserved, not used), and grows by
// 64 MiB arenas.
const asHeadroom = 1 << 30

// mappedBytes is this process's virtual memory size (VmSize).
func mappedBytes() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			var kb uint64
			if _, err := fmt.Sscan(v, &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmSize in /proc/self/status")
}

// startCommand is the second stage done by the first (see oneStage). On
// a thread of its own, which it never gives back (the Go runtime ends it
// with its goroutine), it confines that thread alone (no_new_privs and
// Landlock), reports the confinement, sets the limits and starts the
// command, which inherits the thread's confinement as it would have the
// second stage's. This process stays outside the Landlock domain, as it
// was with two stages: with Landlock's scoping the command cannot signal
// it. If the command cannot be started it reports the exit status 127, as
// the second stage's failed exec did.
func startCommand(status *os.File, cfg *helperConfig) *os.Process {
	fail := func(st helperStatus) {
		writeStatus(status, st)
		os.Exit(127)
	}
	started := make(chan *os.Process)
	go func() {
		runtime.LockOSThread() // never unlocked
		if os.Geteuid() == 0 {
			// The bounding and inheritable sets are the thread's:
			// this one's are the command's.
			_ = dropCapabilities()
		}
		conf, path := confine(cfg, fail, restrictThread)
		// Nothing but the standard files reaches the command: the
		// status and the proxy's socket are this process's alone.
		if err := closeOnExecFrom(3); err != nil {
			fail(helperStatus{Confinement: &conf, Error: "closing inherited descriptors: " + err.Error()})
		}
		writeStatus(status, helperStatus{Confinement: &conf})
		setLimits(cfg)
		child, err := os.StartProcess(path, cfg.Argv, &os.ProcAttr{
			Dir:   cfg.Dir,
			Env:   cfg.Env,
			Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		})
		if err != nil {
			w := 127 << 8
			writeStatus(status, helperStatus{Exited: &w})
			os.Exit(127)
		}
		started <- child
	}()
	return <-started
}

// confine is what the second stage does before it execs the command: it
// works out the confinement, applies Landlock with restrict (to the whole
// process, or to the thread that starts the command), and finds the
// program. It calls fail (which does not return) if confinement is
// required and missing, or the program is not found.
func confine(cfg *helperConfig, fail func(helperStatus), restrict func(*helperConfig) error) (Confinement, string) {
	conf := Confinement{ABI: landlockABI(), Network: "allowed", Isolated: cfg.Rooted, Overlays: cfg.OverlaysMounted}
	conf.Notes = append(conf.Notes, cfg.OverlayNotes...)
	if !cfg.Rooted && len(cfg.Overlays) > 0 {
		conf.Notes = append(conf.Notes, "overlays not mounted (no mount namespace): their targets are plain directories")
	}
	if os.Geteuid() == 0 && hasCapabilities() {
		conf.Notes = append(conf.Notes, "root's capabilities could not be dropped")
	}
	if !cfg.Rooted && !cfg.Unconfined {
		why := cfg.NotIsolated
		if why == "" {
			why = "no PID and mount namespaces"
		}
		if cfg.RequireIsolation {
			// The parent starts no helper without the namespaces
			// then; this one refuses all the same.
			fail(helperStatus{NotIsolated: true, Error: "not isolated (" + why + ")"})
		}
		note := "not isolated (" + why + "): the command can see other processes and reach Unix sockets outside its paths"
		if os.Geteuid() == 0 {
			// Landlock does not govern a file's metadata, and root
			// owns the host's system files.
			note += "; run by root, it can change the mode and times of any file of root it can name, and lower the limits of root's processes"
		}
		conf.Notes = append(conf.Notes, note)
	}
	if !cfg.Unconfined && conf.ABI > 0 {
		if err := restrict(cfg); err != nil {
			if errors.Is(err, ErrLinkBelowWritable) {
				fail(helperStatus{Error: err.Error()})
			}
			conf.Notes = append(conf.Notes, "Landlock failed: "+err.Error())
		} else {
			conf.Confined = true
		}
	}
	if !cfg.Unconfined {
		// On this thread, as Landlock: see denyKeyrings.
		if err := denyKeyrings(); err != nil {
			conf.Notes = append(conf.Notes, "the kernel's keyrings could not be denied: "+err.Error())
		}
	}
	switch {
	case cfg.Unconfined:
		conf.Notes = append(conf.Notes, "confinement was turned off")
	case conf.ABI == 0:
		conf.Notes = append(conf.Notes, "the kernel does not offer Landlock")
	}
	if cfg.DenyNet && cfg.ProxyPort > 0 {
		conf.Network = "namespace+proxy"
	} else if cfg.DenyNet {
		var how []string
		if cfg.NetNS {
			how = append(how, "namespace")
		}
		if conf.Confined && conf.ABI >= 4 {
			how = append(how, "landlock-tcp")
		}
		conf.Network = strings.Join(how, "+")
		if conf.Network == "" {
			conf.Network = "none"
			conf.Notes = append(conf.Notes, "network access could not be denied")
		} else if !cfg.NetNS && conf.ABI < 10 {
			conf.Notes = append(conf.Notes, "UDP is not denied (no network namespace, Landlock before ABI 10)")
		}
	}
	if cfg.Cgroup != "" {
		conf.Processes = "cgroup"
	} else if cfg.NProc > 0 {
		conf.Processes = "rlimit"
	}
	if cfg.Require && !conf.Confined {
		fail(helperStatus{NotConfined: true, Confinement: &conf, Error: strings.Join(conf.Notes, "; ")})
	}
	if cfg.Zygote {
		return conf, "" // each command's program is looked up as it comes
	}
	path, err := lookPath(cfg.Argv[0], cfg.Env)
	if err != nil {
		fail(helperStatus{Confinement: &conf, Error: err.Error()})
	}
	return conf, path
}

// setLimits sets the command's rlimits on this process, which passes
// them on.
func setLimits(cfg *helperConfig) {
	setLimit(unix.RLIMIT_CPU, cfg.CPU, cfg.CPU+1)
	setLimit(unix.RLIMIT_AS, cfg.AS, cfg.AS)
	setLimit(unix.RLIMIT_FSIZE, cfg.FSize, cfg.FSize)
	setLimit(unix.RLIMIT_NPROC, cfg.NProc, cfg.NProc)
}

func setLimit(resource int, soft, hard uint64) {
	if soft == 0 {
		return
	}
	_ = unix.Setrlimit(resource, &unix.Rlimit{Cur: soft, Max: hard})
}

// restrictProcess applies Landlock's rules (see landlockRules) to every
// thread of this process.
func restrictProcess(cfg *helperConfig) error {
	c, rules, closeFDs, err := landlockRules(cfg)
	defer closeFDs()
	if err != nil {
		return err
	}
	return c.Restrict(rules...)
}

// restrictThread applies no_new_privs and Landlock's rules (see
// landlockRules) to the calling thread alone, which must be locked to its
// goroutine and never unlocked.
func restrictThread(cfg *helperConfig) error {
	c, rules, closeFDs, err := landlockRules(cfg)
	defer closeFDs()
	if err != nil {
		return err
	}
	fd, flags, err := c.NewRulesetFD(rules...)
	if err != nil || fd < 0 {
		return err // fd < 0: nothing to enforce (no Landlock)
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	return llsyscall.LandlockRestrictSelf(fd, flags)
}

// landlockRules are the command's Landlock rules: read-only and read-write
// paths, TCP denied unless allowed, and scoping of signals and abstract
// Unix sockets. Each path is opened as the root's binds are (openGrant:
// no link followed below a writable path) and its rule names the
// descriptor (/proc/self/fd/N), which closeFDs closes once the rules are
// applied: the file the rule is added for is the file checked.
func landlockRules(cfg *helperConfig) (_ landlock.Config, _ []landlock.Rule, closeFDs func(), _ error) {
	c := landlock.V11
	if !cfg.DenyNet || cfg.ProxyPort > 0 {
		// With a proxy the namespace is the wall: inside it the
		// command may serve itself on its loopback and reach the
		// forwarder.
		c.HandledAccessNet = 0
	}
	var fds []int
	closeFDs = func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	regions := writableRegions(cfg.Writable)
	// open returns the descriptor's name and whether it is a directory;
	// "" for a path that is not there.
	open := func(p string, rw bool) (string, bool, error) {
		fd, _, _, err := openGrant(p, regions)
		if err != nil {
			if errors.Is(err, ErrLinkBelowWritable) {
				return "", false, grantError(grantKind(p, cfg.Dir, rw), p, err)
			}
			if !rw || strings.HasPrefix(p, "/dev/") {
				return "", false, nil // a system path this machine lacks
			}
			return "", false, fmt.Errorf("read-write path: %w", err)
		}
		fds = append(fds, fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return "", false, err
		}
		return "/proc/self/fd/" + strconv.Itoa(fd), st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
	}
	var rules []landlock.Rule
	for _, p := range cfg.ReadOnly {
		name, dir, err := open(p, false)
		if err != nil {
			return c, nil, closeFDs, err
		}
		switch {
		case name == "":
		case dir:
			rules = append(rules, landlock.RODirs(name))
		default:
			rules = append(rules, landlock.ROFiles(name))
		}
	}
	rw := cfg.ReadWrite
	if cfg.PrivateTmp && cfg.Rooted {
		rw = append(slices.Clone(rw), "/tmp") // the root's own tmpfs
	}
	if cfg.Terminals && cfg.Rooted {
		// The root's own devpts, whose terminals are set up by ioctl.
		rules = append(rules, landlock.RWDirs("/dev/pts").WithIoctlDev())
	}
	for _, p := range rw {
		name, dir, err := open(p, true)
		if err != nil {
			return c, nil, closeFDs, err
		}
		switch {
		case name == "":
		case dir:
			rules = append(rules, landlock.RWDirs(name).WithRefer())
		default:
			rules = append(rules, landlock.RWFiles(name))
		}
	}
	return c.BestEffort(), rules, closeFDs, nil
}

// dropCapabilities empties the capability bounding set, so that the command
// run by root has no capabilities after exec: it cannot load modules,
// reconfigure the network or override file permissions.
func dropCapabilities() error {
	for c := 0; c <= lastCap(); c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return err
		}
	}
	// Clear the ambient set too, and the inheritable set with it.
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	return unix.Capset(&hdr, &data[0])
}

// lastCap is the highest capability the kernel knows, read once: the
// first stage drops the bounding set on two threads.
var lastCap = sync.OnceValue(func() int {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		fmt.Sscan(string(b), &last)
	}
	return last
})

// hasCapabilities reports whether the bounding set still holds a
// capability (CAP_SYS_ADMIN stands for all): the first stage dropped them.
func hasCapabilities() bool {
	ok, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, unix.CAP_SYS_ADMIN, 0, 0, 0)
	return err == nil && ok == 1
}

// lookPath finds the program in the PATH of env, as the command will see
// it.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := DefaultPath
	for _, kv := range slices.Backward(env) {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
			break
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found in PATH %s", file, path)
}
