package desktop

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// writeXauthority writes a cookie file that lets whoever reads it connect
// to any display of this machine started with it (-auth): one entry of
// family FamilyWild, no display number, MIT-MAGIC-COOKIE-1 and 16 random
// bytes. Nothing without the file connects to the display.
func writeXauthority(path string) error {
	cookie := make([]byte, 16)
	if _, err := rand.Read(cookie); err != nil {
		return err
	}
	var b []byte
	b = binary.BigEndian.AppendUint16(b, 0xffff) // FamilyWild
	for _, f := range [][]byte{nil, nil, []byte("MIT-MAGIC-COOKIE-1"), cookie} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	return os.WriteFile(path, b, 0o600)
}

// An xserver is a started Xvfb.
type xserver struct {
	cmd     *exec.Cmd
	display string // ":N"
	done    chan struct{}
}

// startXvfb starts Xvfb with a screen of w×h pixels, 24 bits deep, on the
// first free display (-displayfd), only local connections (no TCP), the
// cookie of authFile required, its output to log. It returns once the
// server accepts connections.
func startXvfb(ctx context.Context, w, h int, authFile string, log io.Writer) (*xserver, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", fmt.Sprintf("%dx%dx24", w, h),
		"-nolisten", "tcp", "-auth", authFile, "-nolock", "-noreset")
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("starting Xvfb: %w", err)
	}
	pw.Close()
	x := &xserver{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(x.done) }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(io.LimitReader(pr, 32)).ReadString('\n')
		line <- s
	}()
	timer := time.NewTimer(20 * time.Second)
	defer timer.Stop()
	select {
	case s := <-line:
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			x.kill()
			return nil, errors.New("the X server (Xvfb) did not start (see its log)")
		}
		x.display = ":" + strconv.Itoa(n)
		return x, nil
	case <-timer.C:
		x.kill()
		return nil, errors.New("the X server (Xvfb) did not start within 20s")
	case <-ctx.Done():
		x.kill()
		return nil, ctx.Err()
	}
}

// kill ends the server and waits for it.
func (x *xserver) kill() {
	_ = syscall.Kill(-x.cmd.Process.Pid, syscall.SIGKILL)
	<-x.done
}
