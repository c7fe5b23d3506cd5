package sandbox

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxForwarded bounds the connections the forwarder relays at once; the
// proxy bounds them again on its side (Proxy.MaxConns).
const maxForwarded = 1024

// startForwarder runs in the first stage, in the command's network
// namespace: it brings the namespace's loopback up, listens on
// 127.0.0.1, and hands every connection made there to the proxy of the
// parent, as one end of a new socket pair sent over ctl (the other end
// relayed to the connection). It returns the port; the forwarder lives as
// long as this process.
func startForwarder(ctl *os.File) (int, error) {
	if err := loopbackUp(); err != nil {
		return 0, fmt.Errorf("bringing the loopback up: %w", err)
	}
	c, err := net.FileConn(ctl)
	ctl.Close()
	if err != nil {
		return 0, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return 0, fmt.Errorf("the proxy's socket is a %T", c)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		uc.Close()
		return 0, err
	}
	sem := make(chan struct{}, maxForwarded)
	go func() {
		for {
			tc, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case sem <- struct{}{}:
			default:
				tc.Close()
				continue
			}
			go func() {
				defer func() { <-sem }()
				forward(uc, tc)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// forward hands tc to the proxy: a socket pair, one end sent over ctl,
// the other relayed to tc.
func forward(ctl *net.UnixConn, tc net.Conn) {
	defer tc.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	_, _, err = ctl.WriteMsgUnix([]byte{0}, unix.UnixRights(fds[1]), nil)
	unix.Close(fds[1])
	if err != nil {
		unix.Close(fds[0])
		return
	}
	f := os.NewFile(uintptr(fds[0]), "relay")
	pc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return
	}
	relay(tc, pc)
}

// loopbackUp sets the IFF_UP flag of the namespace's "lo".
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// proxyVars are the variables that name a proxy, in both cases.
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY", "RSYNC_PROXY"}

// proxyEnv is env without any proxy variable it had, and with those that
// name the forwarder at port.
func proxyEnv(env []string, port int) []string {
	out := make([]string, 0, len(env)+8)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, v := range proxyVars {
			if strings.EqualFold(k, v) {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	hp := "127.0.0.1:" + strconv.Itoa(port)
	for _, kv := range [][2]string{
		{"HTTP_PROXY", "http://" + hp},
		{"HTTPS_PROXY", "http://" + hp},
		{"ALL_PROXY", "socks5h://" + hp},
		{"NO_PROXY", "localhost,127.0.0.1,::1"},
	} {
		out = append(out, kv[0]+"="+kv[1], strings.ToLower(kv[0])+"="+kv[1])
	}
	return out
}
