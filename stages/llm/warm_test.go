//go:build unix

package llm

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// connLog records, on a server, the connections it accepted and the ones
// that carried a request.
type connLog struct {
	mu     sync.Mutex
	opened []string // remote addresses, in accept order
	served map[string]bool
	closed int
	change chan struct{} // a value after each event
}

func newConnLog() *connLog {
	return &connLog{served: map[string]bool{}, change: make(chan struct{}, 1000)}
}

func (l *connLog) state(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	switch s {
	case http.StateNew:
		l.opened = append(l.opened, c.RemoteAddr().String())
	case http.StateClosed:
		l.closed++
	}
	l.mu.Unlock()
	l.change <- struct{}{}
}

func (l *connLog) handler(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	l.mu.Lock()
	l.served[r.RemoteAddr] = true
	l.mu.Unlock()
	okReply(w, r)
}

// waitFor waits until cond holds (checked after each event), or fails.
func (l *connLog) waitFor(t *testing.T, what string, cond func(l *connLog) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		ok := cond(l)
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-l.change:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func chatN(t *testing.T, c Client, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := c.Chat(context.Background(), userReq("hi"))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// loggedServer starts an endpoint answering every call, its connections
// logged, on wrap's listener (nil: the test server's own), and returns it
// with a client of it.
func loggedServer(t *testing.T, wrap func(net.Listener) net.Listener) (*connLog, *httptest.Server, Client) {
	t.Helper()
	log := newConnLog()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(log.handler))
	srv.Config.ConnState = log.state
	if wrap != nil {
		srv.Listener = wrap(srv.Listener)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New(Options{BaseURL: srv.URL + "/v1", Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return log, srv, c
}

// The calls after Prewarm go out on the connections it opened: the server
// sees no other connection, and every request arrives on one of them.
func TestPrewarmedConnectionsCarryTheCalls(t *testing.T) {
	log, _, c := loggedServer(t, nil)
	w := c.(*client).warm
	c.(Prewarmer).Prewarm(4)
	// In the pool, not only accepted by the server: the pool says nothing
	// when it takes one, so it is looked at.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		w.mu.Lock()
		n := len(w.conns)
		w.mu.Unlock()
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d of its 4 connections", n)
		}
	}
	chatN(t, c, 4)
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.opened) != 4 {
		t.Fatalf("the server accepted %d connections, want the 4 pre-dialed ones: %v", len(log.opened), log.opened)
	}
	pre := map[string]bool{}
	for _, a := range log.opened {
		pre[a] = true
	}
	for a := range log.served {
		if !pre[a] {
			t.Errorf("a call came on %s, not a pre-dialed connection", a)
		}
	}
}

// dropListener closes the first n connections it accepts at once, as an
// endpoint that drops connections sending nothing.
type dropListener struct {
	net.Listener
	mu      sync.Mutex
	n       int
	dropped chan string
}

func (l *dropListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		drop := l.n > 0
		l.n--
		l.mu.Unlock()
		if !drop {
			return c, nil
		}
		addr := c.RemoteAddr().String()
		_ = c.Close()
		l.dropped <- addr
	}
}

// A pre-dialed connection the endpoint has closed is not handed to a call
// (which would fail on it, unretried): the call dials anew.
func TestPrewarmSkipsConnectionsTheEndpointClosed(t *testing.T) {
	var dl *dropListener
	log, _, c := loggedServer(t, func(l net.Listener) net.Listener {
		dl = &dropListener{Listener: l, n: 3, dropped: make(chan string, 3)}
		return dl
	})
	c.(Prewarmer).Prewarm(3)
	dropped := map[string]bool{}
	for range 3 {
		select {
		case a := <-dl.dropped:
			dropped[a] = true
		case <-time.After(10 * time.Second):
			t.Fatal("the pre-dialed connections did not arrive")
		}
	}
	// Their ends reach the client: every pooled connection reads as closed.
	w := c.(*client).warm
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		n, open := len(w.conns), 0
		for _, pc := range w.conns {
			if idle(pc) {
				open++
			}
		}
		w.mu.Unlock()
		if n == 3 && open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %d connections, %d still open", n, open)
		}
		time.Sleep(time.Millisecond) // polling the sockets' state: no event to wait on
	}
	chatN(t, c, 1)
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.served) != 1 {
		t.Fatalf("served on %d connections, want 1", len(log.served))
	}
	for a := range log.served {
		if dropped[a] {
			t.Fatalf("the call went out on %s, a connection the endpoint had closed", a)
		}
	}
	w.mu.Lock()
	pooled := len(w.conns)
	w.mu.Unlock()
	if pooled != 0 {
		t.Fatalf("the closed connections stayed pooled: %d", pooled)
	}
}

// Connections no call takes are closed once the pool's time is up, and
// CloseIdleConnections closes them at once.
func TestPrewarmedConnectionsExpire(t *testing.T) {
	for _, byClose := range []bool{false, true} {
		log, srv, c := loggedServer(t, nil)
		cl := c.(*client)
		if !byClose {
			cl.warm.ttl = 500 * time.Millisecond // the dials share it: room for a loaded machine
		} else {
			cl.warm.ttl = time.Hour
		}
		cl.Prewarm(3)
		log.waitFor(t, "3 pre-dialed connections", func(l *connLog) bool { return len(l.opened) == 3 })
		if byClose {
			cl.CloseIdleConnections()
		}
		log.waitFor(t, "their close", func(l *connLog) bool { return l.closed == 3 })
		cl.warm.mu.Lock()
		if len(cl.warm.conns) != 0 || !cl.warm.expired {
			t.Errorf("byClose=%v: pool after expiry holds %d connections (expired %v)", byClose, len(cl.warm.conns), cl.warm.expired)
		}
		cl.warm.mu.Unlock()
		chatN(t, c, 1) // the client still works, on a connection of its own
		srv.Close()
	}
}

// https endpoints (HTTP/2, shared connections) and clients given their own
// HTTPClient are not pre-dialed.
func TestPrewarmLeavesHTTPSAndOwnClientsAlone(t *testing.T) {
	c, err := New(Options{BaseURL: "https://127.0.0.1:1/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	c.(Prewarmer).Prewarm(5)
	w := c.(*client).warm
	w.mu.Lock()
	if w.addr != "" {
		t.Errorf("an https endpoint was pre-dialed at %q", w.addr)
	}
	w.mu.Unlock()
	own, err := New(Options{BaseURL: "http://127.0.0.1:1/v1", Model: "m", HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	own.(Prewarmer).Prewarm(5) // must not panic: nothing to warm
	if own.(*client).warm != nil {
		t.Error("a client given its own HTTPClient has a warm pool")
	}
}

// idle tells an open, quiet connection from one with bytes waiting or one
// closed by its peer.
func TestIdleConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() (net.Conn, net.Conn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c, <-accepted
	}
	quiet, qs := dial()
	defer quiet.Close()
	defer qs.Close()
	if !idle(quiet) {
		t.Error("an open, quiet connection is not idle")
	}
	talked, ts := dial()
	defer talked.Close()
	if _, err := ts.Write([]byte("HTTP/1.1 408 Request Timeout\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitReadable(t, talked)
	if idle(talked) {
		t.Error("a connection with bytes waiting is idle")
	}
	ended, es := dial()
	defer ended.Close()
	es.Close()
	waitReadable(t, ended)
	if idle(ended) {
		t.Error("a connection its peer closed is idle")
	}
	if idle(fakeConn{}) {
		t.Error("a connection without a socket is idle")
	}
}

// waitReadable blocks until c has something to read (bytes or its end),
// without reading it.
func waitReadable(t *testing.T, c net.Conn) {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var perr error
	if err := raw.Control(func(fd uintptr) {
		n, perr = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10_000)
	}); err != nil || perr != nil || n != 1 {
		t.Fatalf("waiting for the connection to be readable: %v %v (%d ready)", err, perr, n)
	}
}

type fakeConn struct{ net.Conn }
