package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// helperEnv marks the re-executed binary as the sandbox helper.
const helperEnv = "HRNS_SANDBOX_HELPER"

const helperMark = "v1"

// The helper's file descriptors: the config to read, the status to write.
const (
	configFD = 3
	statusFD = 4
)

// helperConfig is what the parent tells the helper.
type helperConfig struct {
	Argv       []string `json:"argv"`
	Env        []string `json:"env"`
	ReadOnly   []string `json:"ro"`
	ReadWrite  []string `json:"rw"`
	DenyNet    bool     `json:"deny_net"`
	Unconfined bool     `json:"unconfined"`
	Require    bool     `json:"require"`
	Cgroup     string   `json:"cgroup,omitempty"` // cgroup.procs file to join
	CPU        uint64   `json:"cpu,omitempty"`    // seconds
	AS         uint64   `json:"as,omitempty"`
	FSize      uint64   `json:"fsize,omitempty"`
	NProc      uint64   `json:"nproc,omitempty"`
}

// helperStatus is what the helper tells the parent, one JSON object per
// line: the confinement before exec, then an error if exec failed.
type helperStatus struct {
	Confinement *Confinement `json:"confinement,omitempty"`
	Error       string       `json:"error,omitempty"`
	NotConfined bool         `json:"not_confined,omitempty"`
}

func init() {
	if os.Getenv(helperEnv) != helperMark {
		return
	}
	runHelper() // does not return
}

// runHelper confines this process and execs the command. It never returns:
// on failure it reports on the status pipe and exits with 127.
func runHelper() {
	// Landlock, no_new_privs and the capability bounding set are
	// per-thread until exec: do everything on the thread that execs.
	runtime.LockOSThread()
	status := os.NewFile(statusFD, "status")
	syscall.CloseOnExec(statusFD)
	fail := func(st helperStatus) {
		b, _ := json.Marshal(st)
		status.Write(append(b, '\n'))
		os.Exit(127)
	}
	cfgFile := os.NewFile(configFD, "config")
	var cfg helperConfig
	if err := json.NewDecoder(cfgFile).Decode(&cfg); err != nil {
		fail(helperStatus{Error: "reading the sandbox config: " + err.Error()})
	}
	cfgFile.Close()

	conf := Confinement{ABI: landlockABI(), Network: "allowed"}
	if cfg.Cgroup != "" {
		if err := os.WriteFile(cfg.Cgroup, []byte(fmt.Sprint(os.Getpid())), 0); err != nil {
			fail(helperStatus{Error: "joining the pids cgroup: " + err.Error()})
		}
	}
	if os.Geteuid() == 0 {
		if err := dropCapabilities(); err != nil {
			conf.Notes = append(conf.Notes, "root's capabilities could not be dropped: "+err.Error())
		}
	}
	netns := false
	if cfg.DenyNet {
		netns = inNewNetns()
	}
	if !cfg.Unconfined && conf.ABI > 0 {
		if err := restrict(&cfg); err != nil {
			conf.Notes = append(conf.Notes, "Landlock failed: "+err.Error())
		} else {
			conf.Confined = true
		}
	}
	switch {
	case cfg.Unconfined:
		conf.Notes = append(conf.Notes, "confinement was turned off")
	case conf.ABI == 0:
		conf.Notes = append(conf.Notes, "the kernel does not offer Landlock")
	}
	if cfg.DenyNet {
		var how []string
		if netns {
			how = append(how, "namespace")
		}
		if conf.Confined && conf.ABI >= 4 {
			how = append(how, "landlock-tcp")
		}
		conf.Network = strings.Join(how, "+")
		if conf.Network == "" {
			conf.Network = "none"
			conf.Notes = append(conf.Notes, "network access could not be denied")
		} else if !netns && conf.ABI < 10 {
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

	path, err := lookPath(cfg.Argv[0], cfg.Env)
	if err != nil {
		fail(helperStatus{Confinement: &conf, Error: err.Error()})
	}
	b, _ := json.Marshal(helperStatus{Confinement: &conf})
	status.Write(append(b, '\n'))

	// The limits come last: the address-space limit could starve the Go
	// runtime of this helper.
	setLimit(unix.RLIMIT_CPU, cfg.CPU, cfg.CPU+1)
	setLimit(unix.RLIMIT_AS, cfg.AS, cfg.AS)
	setLimit(unix.RLIMIT_FSIZE, cfg.FSize, cfg.FSize)
	setLimit(unix.RLIMIT_NPROC, cfg.NProc, cfg.NProc)
	err = syscall.Exec(path, cfg.Argv, cfg.Env)
	fail(helperStatus{Error: fmt.Sprintf("exec %s: %v", cfg.Argv[0], err)})
}

func setLimit(resource int, soft, hard uint64) {
	if soft == 0 {
		return
	}
	_ = unix.Setrlimit(resource, &unix.Rlimit{Cur: soft, Max: hard})
}

// inNewNetns reports whether this process has a network namespace of its
// own, which the parent asked for with CLONE_NEWNET.
func inNewNetns() bool {
	self, err1 := os.Readlink("/proc/self/ns/net")
	parent, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", os.Getppid()))
	return err1 == nil && err2 == nil && self != parent
}

// restrict applies Landlock: read-only and read-write paths, TCP denied
// unless allowed, and scoping of signals and abstract Unix sockets.
func restrict(cfg *helperConfig) error {
	c := landlock.V11
	if !cfg.DenyNet {
		c.HandledAccessNet = 0
	}
	var rules []landlock.Rule
	for _, p := range cfg.ReadOnly {
		fi, err := os.Stat(p)
		if err != nil {
			continue // a system path this machine lacks
		}
		if fi.IsDir() {
			rules = append(rules, landlock.RODirs(p))
		} else {
			rules = append(rules, landlock.ROFiles(p))
		}
	}
	for _, p := range cfg.ReadWrite {
		fi, err := os.Stat(p)
		if err != nil {
			if strings.HasPrefix(p, "/dev/") {
				continue // a device this machine lacks
			}
			return fmt.Errorf("read-write path: %w", err)
		}
		if fi.IsDir() {
			rules = append(rules, landlock.RWDirs(p).WithRefer())
		} else {
			rules = append(rules, landlock.RWFiles(p))
		}
	}
	return c.BestEffort().Restrict(rules...)
}

// dropCapabilities empties the capability bounding set, so that the command
// run by root has no capabilities after exec: it cannot load modules,
// reconfigure the network or override file permissions.
func dropCapabilities() error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		fmt.Sscan(string(b), &last)
	}
	for c := 0; c <= last; c++ {
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
