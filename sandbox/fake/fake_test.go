package fake

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	d := New()
	sandboxtest.Run(t, func(*testing.T) sandbox.Driver { return d }, sandboxtest.Caps{
		AfterClose: func(t *testing.T, _ sandbox.Spec, s sandbox.Session) {
			if !s.(*Session).Closed() {
				t.Errorf("session not marked closed")
			}
		},
	})
	if n := d.OpenSessions(); n != 0 {
		t.Errorf("%d sessions left open", n)
	}
}

func TestScripted(t *testing.T) {
	d := New().
		On("ls", Response{Result: sandbox.Result{Stdout: "a\nb\n"}}).
		OnPrefix("cat ", Response{Result: sandbox.Result{Stderr: "no such file", ExitCode: 1}}).
		OnPrefix("boom", Response{Err: sandbox.ErrUnavailable}).
		On("slow", Response{Delay: time.Hour})
	d.Queue(Response{Result: sandbox.Result{Stdout: "first"}})
	ctx := context.Background()
	s, err := d.Open(ctx, sandbox.Spec{RolloutID: "r1", Image: "img", MaxOutput: 20})
	if err != nil {
		t.Fatal(err)
	}
	check := func(cmd string, wantOut string, wantCode int) {
		t.Helper()
		res, err := s.Exec(ctx, sandbox.Cmd{Command: cmd, Timeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if res.Stdout+res.Stderr != wantOut || res.ExitCode != wantCode {
			t.Fatalf("%s: got %+v", cmd, res)
		}
	}
	check("ls", "first", 0) // queue first
	check("ls", "a\nb\n", 0)
	check("cat x", "no such file", 1)
	check("exit 9", "", 9)
	check("echo hi there", "hi there\n", 0)
	check("slow", "", 124)
	res, _ := s.Exec(ctx, sandbox.Cmd{Command: "echo " + strings.Repeat("x", 100)})
	if !res.Truncated || !strings.Contains(res.Stdout, "truncated") {
		t.Fatalf("output limit not applied: %+v", res)
	}
	if _, err := s.Exec(ctx, sandbox.Cmd{Command: "boom"}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("scripted error: %v", err)
	}
	calls := d.Calls()
	if len(calls) != 8 || calls[0].RolloutID != "r1" || calls[0].Image != "img" || calls[5].Timeout != 50*time.Millisecond {
		t.Fatalf("calls: %+v", calls)
	}
	if d.OpenSessions() != 1 {
		t.Fatal("open count")
	}
	_ = s.Close(ctx)
	if d.OpenSessions() != 0 || d.Opened() != 1 {
		t.Fatal("close count")
	}
	d.FailOpen(sandbox.ErrUnavailable)
	if _, err := d.Open(ctx, sandbox.Spec{}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("FailOpen: %v", err)
	}
}

// BenchmarkFiles1MiB measures a 1 MiB WriteFile plus reading it back in
// memory (the floor the real drivers compare with).
func BenchmarkFiles1MiB(b *testing.B) {
	s, err := New().Open(context.Background(), sandbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	sandboxtest.BenchWriteRead1MiB(b, s)
}
