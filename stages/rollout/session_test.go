package rollout

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/fake"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// testClock is a clock that moves only when a peer says its work took time.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// slowClient's calls take model on the clock.
type slowClient struct {
	llm.Client
	clock *testClock
	model time.Duration
}

func (c slowClient) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	c.clock.advance(c.model)
	return c.Client.Chat(ctx, req)
}

// slowDriver's opens take open on the clock, starting a session's shell
// (sandbox.Starter) start, and its commands run.
type slowDriver struct {
	sandbox.Driver
	clock            *testClock
	open, start, run time.Duration
}

func (d slowDriver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	d.clock.advance(d.open)
	s, err := d.Driver.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	return slowSession{s, d}, nil
}

type slowSession struct {
	sandbox.Session
	d slowDriver
}

func (s slowSession) Start(context.Context) error {
	s.d.clock.advance(s.d.start)
	return nil
}

func (s slowSession) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	s.d.clock.advance(s.d.run)
	return s.Session.Exec(ctx, cmd)
}

const twoCommands = `{"scripts": [{"match": "^go", "steps": [
	{"tool_calls": [{"name": "terminal", "arguments": {"command": "echo a"}}, {"name": "terminal", "arguments": {"command": "echo b"}}]},
	{"tool_calls": [{"name": "todo", "arguments": {"todos": [{"id": "1", "content": "x", "status": "pending"}]}}]},
	{"tool_calls": [{"name": "terminal", "arguments": {"command": "echo c"}}]},
	{"content": "done"}]},
	{"match": "^chat", "steps": [{"content": "hello"}]}]}`

// TestTimingsAccountForEveryStep runs rollouts on a clock that moves only
// in the model's calls, the sandbox's open, its shell's start and its
// commands: the record's figures must then be exactly those, the open and
// the start counted once as sandbox_start and never as tool time, and add
// up to duration_ms.
func TestTimingsAccountForEveryStep(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	client := slowClient{Client: env(t, fakellm.Config{Scripts: scripts(t, twoCommands)}, 0), clock: clock, model: 250 * time.Millisecond}
	d := fake.New()
	st, err := New(Options{Client: client, Model: "m", Now: clock.now, Toolsets: []string{"terminal", "todo"},
		Driver: slowDriver{Driver: d, clock: clock, open: 400 * time.Millisecond, start: 150 * time.Millisecond, run: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	rec := record("go")
	rec.Timings = &schemas.Timings{QueueMS: 7} // the runtime's, kept
	if _, err := st.Process(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != schemas.OutcomeCompleted {
		t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
	}
	want := schemas.Timings{ModelMS: 4 * 250, ToolMS: 3 * 100, SandboxStartMS: 400 + 150, QueueMS: 7}
	if rec.Timings == nil || *rec.Timings != want {
		t.Fatalf("timings %+v, want %+v", rec.Timings, want)
	}
	tm := rec.Timings
	if sum := tm.ModelMS + tm.ToolMS + tm.SandboxStartMS + tm.SandboxCloseMS + tm.GraderMS; sum != rec.DurationMS {
		t.Fatalf("model+tool+sandbox_start+sandbox_close+grader = %d ms, duration_ms %d", sum, rec.DurationMS)
	}
	if err := st.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d.Opened() != 1 || d.OpenSessions() != 0 {
		t.Fatalf("sessions opened %d, still open %d; want 1 opened and closed", d.Opened(), d.OpenSessions())
	}
}

// TestRowWithoutToolsOpensNoSandbox: a rollout whose model never calls a
// tool that needs the sandbox opens no session at all.
func TestRowWithoutToolsOpensNoSandbox(t *testing.T) {
	client := env(t, fakellm.Config{Scripts: scripts(t, twoCommands)}, 0)
	d := fake.New()
	st, err := New(Options{Client: client, Model: "m", Driver: d, Toolsets: []string{"terminal"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := record("chat")
	if _, err := st.Process(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != schemas.OutcomeCompleted || d.Opened() != 0 {
		t.Fatalf("outcome %s, sessions opened %d; want completed and none", rec.Outcome, d.Opened())
	}
	if rec.Timings == nil || rec.Timings.SandboxStartMS != 0 || rec.Timings.ToolMS != 0 {
		t.Fatalf("timings %+v", rec.Timings)
	}
}

// TestLazySessionOpensAtFirstUse: nothing opens until the first command (a
// grader's after the turns too), the open happens once, and a session
// taken for closing is closed once by its taker.
func TestLazySessionOpensAtFirstUse(t *testing.T) {
	d := fake.New()
	ls := newLazySession(d, sandbox.Spec{RolloutID: "r"}, time.Now)
	if d.Opened() != 0 {
		t.Fatal("opened before any use")
	}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := ls.Exec(ctx, sandbox.Cmd{Command: "echo hi"}); err != nil {
			t.Fatal(err)
		}
	}
	if d.Opened() != 1 {
		t.Fatalf("opened %d times, want 1", d.Opened())
	}
	c := newCloser()
	c.close(ctx, ls.take())
	if err := c.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if d.OpenSessions() != 0 {
		t.Fatalf("%d sessions left open", d.OpenSessions())
	}
	if _, err := ls.Exec(ctx, sandbox.Cmd{Command: "echo hi"}); err == nil || d.Opened() != 1 {
		t.Fatalf("a use after the close: err %v, opened %d; want an error and no new open", err, d.Opened())
	}
}

// TestFailedOpenIsNotRetriedButCancelIs: a use under a cancelled context
// opens nothing and leaves the next use free to open.
func TestFailedOpenIsNotRetriedButCancelIs(t *testing.T) {
	d := fake.New()
	ls := newLazySession(d, sandbox.Spec{RolloutID: "r"}, time.Now)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ls.Exec(cctx, sandbox.Cmd{Command: "true"}); err == nil || d.Opened() != 0 {
		t.Fatalf("cancelled use: err %v, opened %d", err, d.Opened())
	}
	if _, err := ls.Exec(context.Background(), sandbox.Cmd{Command: "true"}); err != nil || d.Opened() != 1 {
		t.Fatalf("use after a cancelled one: err %v, opened %d", err, d.Opened())
	}
	_ = ls.Close(context.Background())
}

// TestCloseClosesIdleConnections: once the run's rollouts are over, the
// stage's Close closes the client's connections to the endpoint (the
// server sees them closed), so the process does not end with them open.
func TestCloseClosesIdleConnections(t *testing.T) {
	var open, closed atomic.Int64
	srv := httptest.NewUnstartedServer(fakellm.New(fakellm.Config{Scripts: scripts(t, twoCommands)}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	client, err := llm.New(llm.Options{BaseURL: srv.URL + "/v1", RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, err := New(Options{Client: client, Model: "m", Driver: fake.New(), Toolsets: []string{"terminal"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := st.Process(context.Background(), record("go"))
	if err != nil || out[0].Outcome != schemas.OutcomeCompleted {
		t.Fatalf("rollout: %v", err)
	}
	if open.Load() == 0 || closed.Load() != 0 {
		t.Fatalf("before Close: %d connections opened, %d closed", open.Load(), closed.Load())
	}
	if err := st.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for closed.Load() < open.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the server learns of the close from its read
	}
	if closed.Load() != open.Load() {
		t.Errorf("after Close: %d of %d connections closed", closed.Load(), open.Load())
	}
}
