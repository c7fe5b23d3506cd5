package sandbox

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// proxyHandshake bounds the time a client of the proxy has to say where
// it goes (its first byte, SOCKS5's handshake, HTTP's request head).
const proxyHandshake = 30 * time.Second

// proxyServer is the proxy of one command's run ([Proxy]): it takes the
// connections the first stage's forwarder sends over ctl, and serves each
// as HTTP or SOCKS5, dialling with the spec's Dial.
type proxyServer struct {
	p      *Proxy
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	http   *http.Server
	toHTTP *chanListener
	tr     *http.Transport

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// serveProxy serves the proxy of spec over ctl (this end of the socket
// pair the first stage holds the other end of) until close. A socket that
// cannot be served leaves the command without network.
func serveProxy(ctl *os.File, p *Proxy) *proxyServer {
	ctx, cancel := context.WithCancel(context.Background())
	n := p.MaxConns
	if n <= 0 {
		n = 256
	}
	s := &proxyServer{p: p, ctx: ctx, cancel: cancel, sem: make(chan struct{}, n), conns: map[net.Conn]struct{}{}}
	s.toHTTP = &chanListener{c: make(chan net.Conn), done: make(chan struct{})}
	s.tr = &http.Transport{
		Proxy:                  nil,
		DialContext:            s.dial,
		MaxResponseHeaderBytes: 1 << 20,
		ResponseHeaderTimeout:  5 * time.Minute,
		IdleConnTimeout:        30 * time.Second,
		MaxIdleConnsPerHost:    4,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.Host = pr.In.Host
		},
		Transport: s.tr,
		ErrorLog:  log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			refuse(w, err)
		},
	}
	s.http = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodConnect:
				s.connect(w, r)
			case r.URL.IsAbs() && r.URL.Scheme == "http" && r.URL.Host != "":
				rp.ServeHTTP(w, r)
			default:
				http.Error(w, "hrns proxy: only CONNECT and requests for an absolute http:// URL are proxied", http.StatusBadRequest)
			}
		}),
		ReadHeaderTimeout: proxyHandshake,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       time.Minute,
		// What a command sends it is no news for this process's log.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.http.Serve(s.toHTTP)
	}()
	go func() {
		defer s.wg.Done()
		s.accept(ctl)
	}()
	return s
}

// close stops the proxy: every connection through it ends.
func (s *proxyServer) close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	s.cancel()
	for c := range conns {
		c.Close()
	}
	s.toHTTP.Close()
	s.http.Close()
	s.tr.CloseIdleConnections()
	s.wg.Wait()
}

// track records c to be closed by close, or closes it and returns false
// if the proxy is closed already.
func (s *proxyServer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *proxyServer) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// accept receives the connections the forwarder sends over ctl.
func (s *proxyServer) accept(ctl *os.File) {
	c, err := net.FileConn(ctl)
	if err != nil {
		return
	}
	uc, ok := c.(*net.UnixConn)
	if !ok || !s.track(c) {
		c.Close()
		return
	}
	defer s.untrack(c)
	defer c.Close()
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		_, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
		if err != nil {
			return
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				s.take(fd)
			}
		}
	}
}

// take serves the connection of fd, if the proxy has room for it.
func (s *proxyServer) take(fd int) {
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "proxied")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return
	}
	s.adopt(conn)
}

// adopt serves conn if the proxy has room for it, else closes it. The
// connection holds its room until it is closed, by whoever serves it.
func (s *proxyServer) adopt(conn net.Conn) {
	select {
	case s.sem <- struct{}{}:
	default:
		conn.Close()
		return
	}
	if !s.track(conn) {
		<-s.sem
		return
	}
	oc := &ownedConn{Conn: conn, release: func() {
		s.untrack(conn)
		<-s.sem
	}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.serve(oc)
	}()
}

// serve tells SOCKS5 (its first byte is 5) from HTTP and serves conn.
func (s *proxyServer) serve(conn net.Conn) {
	conn.SetReadDeadline(time.Now().Add(proxyHandshake))
	br := bufio.NewReader(conn)
	first, err := br.Peek(1)
	if err != nil {
		conn.Close()
		return
	}
	pc := &peekedConn{Conn: conn, r: br}
	if first[0] == 5 {
		defer conn.Close()
		s.socks(pc)
		return
	}
	conn.SetReadDeadline(time.Time{})
	// The HTTP server has it from here, and closes it; close closes it
	// too, should the server not yet have it.
	select {
	case s.toHTTP.c <- pc:
	case <-s.toHTTP.done:
		conn.Close()
	}
}

// dial connects to address with the spec's Dial, within the dial
// timeout.
func (s *proxyServer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d := s.p.DialTimeout
	if d <= 0 {
		d = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	c, err := s.p.Dial(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	if !s.track(c) {
		return nil, net.ErrClosed
	}
	return &trackedConn{Conn: c, s: s}, nil
}

// refuse answers a failed dial: 403 for a refusal of the policy, 502 for
// any other error.
func refuse(w http.ResponseWriter, err error) {
	status := http.StatusBadGateway
	if errors.Is(err, ErrDestinationRefused) {
		status = http.StatusForbidden
	}
	http.Error(w, "hrns proxy: "+err.Error(), status)
}

// connect serves a CONNECT request: a tunnel to its host:port.
func (s *proxyServer) connect(w http.ResponseWriter, r *http.Request) {
	if _, _, err := net.SplitHostPort(r.Host); err != nil {
		http.Error(w, "hrns proxy: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	dst, err := s.dial(r.Context(), "tcp", r.Host)
	if err != nil {
		refuse(w, err)
		return
	}
	defer dst.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "hrns proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	if !s.track(c) {
		return
	}
	defer s.untrack(c)
	defer c.Close()
	c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	relay(&peekedConn{Conn: c, r: brw.Reader}, dst)
}

// socks serves a SOCKS5 client (RFC 1928): no authentication, CONNECT
// only.
func (s *proxyServer) socks(c *peekedConn) {
	reply := func(code byte) error {
		_, err := c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
		return err
	}
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		c.Write([]byte{5, 0xff})
		return
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return
	}
	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[0] != 5 {
		return
	}
	var host string
	switch req[3] {
	case 1, 4:
		a := make([]byte, 4)
		if req[3] == 4 {
			a = make([]byte, 16)
		}
		if _, err := io.ReadFull(c, a); err != nil {
			return
		}
		host = net.IP(a).String()
	case 3:
		var n [1]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(c, name); err != nil {
			return
		}
		host = string(name)
	default:
		reply(8) // address type not supported
		return
	}
	var port [2]byte
	if _, err := io.ReadFull(c, port[:]); err != nil {
		return
	}
	if req[1] != 1 {
		reply(7) // command not supported
		return
	}
	dst, err := s.dial(s.ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:])))))
	if err != nil {
		code := byte(5) // connection refused
		var ne net.Error
		switch {
		case errors.Is(err, ErrDestinationRefused):
			code = 2 // not allowed by ruleset
		case errors.As(err, &ne) && ne.Timeout():
			code = 4 // host unreachable
		}
		reply(code)
		return
	}
	defer dst.Close()
	if err := reply(0); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	relay(c, dst)
}

// relay copies a to b and b to a until both directions end, passing each
// end of input on as a half close, then closes both.
func relay(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}

// peekedConn is a connection whose reads go through the reader that
// peeked at it.
type peekedConn struct {
	net.Conn
	r io.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *peekedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// ownedConn is a connection of a client of the proxy: closing it gives
// its room back.
type ownedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *ownedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

func (c *ownedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// trackedConn is a connection to a destination, forgotten by the proxy
// once closed.
type trackedConn struct {
	net.Conn
	s    *proxyServer
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.s.untrack(c.Conn) })
	return c.Conn.Close()
}

func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// chanListener is a net.Listener of the connections sent to c.
type chanListener struct {
	c    chan net.Conn
	done chan struct{}
	once sync.Once
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.UnixAddr{Name: "hrns-proxy", Net: "unix"} }
