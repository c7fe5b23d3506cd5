package desktop

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
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	cfg := os.Getenv(agentEnv)
	if cfg == "" {
		return
	}
	os.Exit(agentMain(cfg, os.Stdin, os.Stdout))
}

// agentMain is the desktop's agent, in the sandbox: it starts the display,
// the window manager and the apps, answers the host's tool runs, one a line
// on in, one reply a line on out, and when in ends it ends every process it
// started.
func agentMain(cfgJSON string, in io.Reader, out io.Writer) int {
	var cfg agentConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintf(out, "{\"error\":%q}\n", "bad config: "+err.Error())
		return 2
	}
	enc := json.NewEncoder(out)
	fail := func(err error) int {
		_ = enc.Encode(agentReply{Error: err.Error()})
		return 1
	}
	// Standard output carries only replies: this process's and its
	// children's diagnostics go to the log.
	logf, err := os.OpenFile(filepath.Join(cfg.Dir, "desktop.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fail(err)
	}
	if err := unix.Dup3(int(logf.Fd()), 2, 0); err != nil {
		return fail(err)
	}
	auth := os.Getenv("XAUTHORITY")
	if err := writeXauthority(auth); err != nil {
		return fail(fmt.Errorf("writing the display's cookie: %w", err))
	}
	x, err := startXvfb(context.Background(), cfg.Width, cfg.Height, auth, logf)
	if err != nil {
		return fail(fmt.Errorf("%w: %s", err, logTail(cfg.Dir)))
	}
	env := append(os.Environ(), "DISPLAY="+x.display)
	env = without(env, agentEnv)
	var procs []*waited
	defer func() {
		endApps(procs, appGrace)
		x.kill()
	}()
	start := func(argv []string, name string, extra ...string) error {
		if len(argv) == 0 {
			return nil
		}
		f, err := os.Create(filepath.Join(cfg.Dir, name+".log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env, cmd.Dir = append(env[:len(env):len(env)], extra...), os.Getenv("HOME")
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			f.Close()
			return fmt.Errorf("starting %s: %w", argv[0], err)
		}
		w := &waited{cmd: cmd, done: make(chan struct{})}
		go func() {
			// Said in the app's log: the model's host may want to know.
			err := cmd.Wait()
			fmt.Fprintf(f, "\n[hrns: %s ended: %v]\n", argv[0], err)
			f.Close()
			close(w.done)
		}()
		procs = append(procs, w)
		return nil
	}
	// twm places a new window where the user clicks, holding the
	// pointer (and, by default, the server) until then: nobody would.
	if len(cfg.WM) == 1 && filepath.Base(cfg.WM[0]) == "twm" {
		rc := filepath.Join(os.Getenv("HOME"), ".twmrc")
		if _, err := os.Stat(rc); err != nil {
			_ = os.WriteFile(rc, []byte(twmrc), 0o600)
		}
	}
	// twm, in a UTF-8 locale, wants a font set that a minimal system
	// lacks, and exits: window managers run in the C locale.
	if err := start(cfg.WM, "wm", "LANG=C", "LC_ALL=C"); err != nil {
		return fail(err)
	}
	for i, app := range cfg.Apps {
		if err := start(app, fmt.Sprintf("app-%d", i)); err != nil {
			return fail(err)
		}
	}
	if err := enc.Encode(agentReply{Display: x.display}); err != nil {
		return 1
	}
	br := bufio.NewReaderSize(in, 1<<16)
	for {
		line, err := readLine(br, 1<<20)
		if err != nil {
			return 0 // the host is gone, or closed the desktop
		}
		var req agentRequest
		if err := json.Unmarshal(line, &req); err != nil || len(req.Argv) == 0 {
			return fail(errors.New("a request that does not read"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(req.Timeout)*time.Millisecond)
		b, err := runTool(ctx, req.Argv, env, req.Max)
		cancel()
		rep := agentReply{ID: req.ID, Size: len(b)}
		if errors.Is(err, context.DeadlineExceeded) {
			rep.Timeout = true
		} else if err != nil {
			rep.Error = err.Error()
		}
		if err := enc.Encode(rep); err != nil {
			return 1
		}
		if _, err := out.Write(b); err != nil {
			return 1
		}
	}
}

// twmrc is the twm configuration a desktop's home gets unless it has one:
// windows placed where they ask or at random, never by hand, and no grab
// of the server.
const twmrc = `RandomPlacement
UsePPosition "on"
NoGrabServer
DecorateTransients
`

// waited is a started process and the end of its wait.
type waited struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// appGrace is how long the desktop's apps have, once asked to end
// (SIGTERM), to finish what they were doing (an app saving a file the
// last action asked for) before they are killed. The host waits 5 s for
// the agent to end before the sandbox kills everything: the grace fits.
const appGrace = 2 * time.Second

// endApps ends the started processes, each with its process group: it
// asks them all to end (SIGTERM), waits until they have or grace has
// passed, then kills what is left (SIGKILL) and waits for it. The display
// is still up meanwhile, so an app can finish drawing and saving.
func endApps(procs []*waited, grace time.Duration) {
	for _, p := range procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline.C:
			// Grace is over: what is left dies.
			for _, q := range procs {
				_ = syscall.Kill(-q.cmd.Process.Pid, syscall.SIGKILL)
			}
			for _, q := range procs {
				<-q.done
			}
			return
		}
	}
	// The apps are gone; anything they left in their groups is not.
	for _, p := range procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// without returns env without the variable key.
func without(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			continue
		}
		out = append(out, kv)
	}
	return out
}
