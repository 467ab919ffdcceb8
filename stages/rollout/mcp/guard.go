package mcp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The kernel's parent-death signal reaches only a stdio server's own
// process: whatever it started (npx starts npm exec, which starts sh,
// which starts node) would outlive a kill -9 of hermes-pipe unless it
// happens to exit when its stdin closes. So right after the server starts,
// a guard joins its process group: a shell blocked reading a pipe whose
// only write end hermes-pipe holds. When hermes-pipe dies, however it
// dies, the kernel closes that end, the read returns and the guard kills
// its whole group, itself included. While the guard lives the group id
// cannot be reused, so the kill never reaches a stranger. Closing a
// connection kills the group (guard included) as before.

// guardScript waits for end of input, then kills its process group.
const guardScript = "read line; kill -KILL 0"

// guard is one server's guard process.
type guard struct {
	done chan struct{} // closed once the guard is reaped and its pipe closed
}

// startGuard starts a guard in process group pgid.
func startGuard(pgid int) (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	cmd.Stdin = r
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	g := &guard{done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		w.Close()
		close(g.done)
	}()
	return g, nil
}

// wait blocks until the guard has ended (its group was killed); nil-safe.
func (g *guard) wait() {
	if g != nil {
		<-g.done
	}
}

// guardedTransport is a stdio transport that starts the server's guard
// as soon as the server process runs, before the handshake.
type guardedTransport struct {
	sdk.Transport
	c *conn
}

func (t *guardedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	cn, err := t.Transport.Connect(ctx)
	for _, f := range t.c.cmd.ExtraFiles {
		f.Close() // a confined server's seccomp filter: bwrap has its own copy
	}
	if err != nil {
		return nil, err
	}
	g, err := startGuard(t.c.cmd.Process.Pid)
	if err != nil {
		_ = cn.Close()
		return nil, fmt.Errorf("cannot start the guard of the server's process group: %w", err)
	}
	t.c.guard = g
	return cn, nil
}
