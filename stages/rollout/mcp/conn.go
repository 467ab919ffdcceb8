package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-pipe/hermes-pipe/stages/llm"
)

// clientInfo is how hermes-pipe introduces itself to servers.
var clientInfo = &sdk.Implementation{Name: "hermes-pipe", Version: "1"}

// stderrTail is how many bytes of a server's stderr are kept for messages.
const stderrTail = 4 << 10

// tailBuffer keeps the last stderrTail bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > stderrTail {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-stderrTail:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(strings.ToValidUTF8(string(t.buf), "\uFFFD"))
}

// conn is one connected server: a started process (stdio) or an HTTP
// session, initialised.
type conn struct {
	srv    *Server
	cs     *sdk.ClientSession
	cmd    *exec.Cmd // stdio only
	stderr *tailBuffer
	done   chan struct{} // closed when the session has ended (a stdio server exited)
	guard  *guard        // stdio only: kills the process group if hermes-pipe dies (guard.go)
	cancel context.CancelFunc
}

// expandWorkdir replaces ${workdir} in s.
func expandWorkdir(s, workdir string) string {
	return strings.ReplaceAll(s, "${workdir}", workdir)
}

// serverEnv is the environment of a stdio server: PATH (so the command and
// what it starts can be found) and the variables its configuration names,
// nothing else of the parent's.
func serverEnv(s *Server, workdir string) []string {
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range s.Env {
		env = append(env, k+"="+expandWorkdir(v, workdir))
	}
	return env
}

// headerTransport adds a server's configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// dial starts (stdio) or connects to (HTTP, SSE) the server and
// initialises the session. It blocks for at most the server's connect
// timeout. A stdio server runs in its own process group and is killed
// (SIGKILL, by the kernel) when the thread that started it dies, so it
// never outlives hermes-pipe; close kills its whole group.
func dial(ctx context.Context, s *Server, workdir string) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.ConnectTimeout)
	defer cancel()
	c := &conn{srv: s, stderr: &tailBuffer{}}
	client := sdk.NewClient(clientInfo, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}})
	var t sdk.Transport
	switch s.Transport {
	case TransportStdio:
		args := make([]string, len(s.Args))
		for i, a := range s.Args {
			args[i] = expandWorkdir(a, workdir)
		}
		cmd := exec.Command(expandWorkdir(s.Command, workdir), args...)
		cmd.Env = serverEnv(s, workdir)
		cmd.Dir = expandWorkdir(s.Cwd, workdir)
		cmd.Stderr = c.stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if s.confine != nil {
			if err := s.confine.wrap(cmd, s, workdir); err != nil {
				return nil, fmt.Errorf("mcp server %q: cannot confine it: %w", s.Name, err)
			}
		}
		c.cmd = cmd
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	case TransportHTTP, TransportSSE:
		hc := &http.Client{Transport: &headerTransport{base: http.DefaultTransport, headers: s.Headers}}
		if s.Transport == TransportHTTP {
			t = &sdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}
		} else {
			t = &sdk.SSEClientTransport{Endpoint: s.URL, HTTPClient: hc}
		}
	default:
		return nil, fmt.Errorf("unknown transport %q", s.Transport)
	}
	if c.cmd != nil {
		t = &guardedTransport{Transport: t, c: c}
	}
	// The connection lives past this call (an SSE stream is bound to the
	// context it was opened with), so it gets its own context, cancelled
	// by close; the connect timeout and ctx bound only the handshake.
	lctx, lcancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = lcancel
	type result struct {
		cs  *sdk.ClientSession
		err error
	}
	ch := make(chan result, 1)
	go func() {
		cs, err := client.Connect(lctx, t, nil)
		ch <- result{cs, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		lcancel()
		c.kill()
		r = <-ch
		if r.err == nil {
			_ = r.cs.Close()
			r.err = ctx.Err()
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			r.err = fmt.Errorf("no answer to initialize within %s", s.ConnectTimeout)
		}
	}
	cs, err := r.cs, r.err
	if err != nil {
		lcancel()
		c.kill()
		if c.cmd != nil && c.cmd.Process != nil && c.cmd.ProcessState == nil {
			_ = c.cmd.Wait() // reap it, for its exit status
		}
		c.guard.wait()
		return nil, c.describe(err)
	}
	c.cs = cs
	c.done = make(chan struct{})
	go func() {
		// Wait returns when the connection ends: for stdio, when the
		// process exits (its stdout closes) or close is called.
		_ = cs.Wait()
		close(c.done)
	}()
	return c, nil
}

// redactor takes the secrets of an HTTP or SSE server (its header values,
// the userinfo of its URL) out of messages: a server that echoes its request
// into an error must not put its token into a record or a log.
func (s *Server) redactor() *llm.Redactor {
	vals := make([]string, 0, len(s.Headers))
	for _, v := range s.Headers {
		vals = append(vals, v)
	}
	return llm.NewRedactor("", s.URL, vals...)
}

// describe adds the server's name and its stderr tail to err, with the
// server's secrets redacted.
func (c *conn) describe(err error) error {
	msg := fmt.Sprintf("mcp server %q: %v", c.srv.Name, err)
	if c.cmd != nil {
		if st := c.cmd.ProcessState; st != nil {
			msg += " (" + st.String() + ")"
		}
		if tail := c.stderr.String(); tail != "" {
			msg += "; stderr: " + tail
		}
	}
	return errors.New(c.srv.redactor().String(msg))
}

// alive reports whether the session still runs (false once a stdio
// server's process has exited).
func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// kill ends a stdio server's whole process group at once.
func (c *conn) kill() {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// close ends the session: for stdio, stdin is closed and the process given
// a moment to exit before its process group is killed. It blocks until the
// process is reaped.
func (c *conn) close() {
	if c.cs != nil {
		done := make(chan struct{})
		go func() { _ = c.cs.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			c.kill()
			<-done
		}
	}
	c.kill() // anything the server started and left behind, and its guard
	c.guard.wait()
	if c.cancel != nil {
		c.cancel()
	}
}
