package local

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// childEnv makes the test binary act as a run that opens a confined session
// and starts a sleep in it (TestKill9Child).
const childEnv = "HERMES_CONFINE_KILL9_BASE"

// TestKill9Child is the child of TestKill9LeavesNothing; it does nothing in
// an ordinary test run.
func TestKill9Child(t *testing.T) {
	base := os.Getenv(childEnv)
	if base == "" {
		t.Skip("only run as the child of TestKill9LeavesNothing")
	}
	d, err := New(sandbox.Config{RunID: "kill9", ShellMode: os.Getenv(childEnv + "_MODE"), Local: sandbox.LocalConfig{BaseDir: base}})
	if err != nil {
		fmt.Println("ERR", err)
		return
	}
	s, err := d.Open(context.Background(), sandbox.Spec{})
	if err != nil {
		fmt.Println("ERR", err)
		return
	}
	fmt.Println("MARKER", s.(*Session).Marker())
	_, _ = s.Exec(context.Background(), sandbox.Cmd{Command: "sleep 1007 & (setsid sleep 1008 &); sleep 1009", Timeout: time.Hour})
}

// TestKill9LeavesNothing kills -9 a process holding a confined session with
// sleeps running in it: every sandbox process dies with it, and gc removes
// the folder it left; in both shell modes.
func TestKill9LeavesNothing(t *testing.T) {
	for _, mode := range []string{sandbox.ShellPersistent, sandbox.ShellFresh} {
		t.Run(mode, func(t *testing.T) { kill9(t, mode) })
	}
}

func kill9(t *testing.T, mode string) {
	base := t.TempDir()
	c := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.v")
	c.Env = append(os.Environ(), childEnv+"="+base, childEnv+"_MODE="+mode)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	var marker string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if m, ok := strings.CutPrefix(line, "MARKER "); ok {
			marker = m
			break
		}
		if strings.HasPrefix(line, "ERR ") {
			t.Fatal(line)
		}
	}
	if marker == "" {
		t.Fatal("child printed no marker")
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	for deadline := time.Now().Add(30 * time.Second); countSleeps(marker) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleeps never started: %v", alive(0, marker))
		}
	}
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	if p := waitNone(0, marker); len(p) > 0 {
		t.Fatalf("processes %v of the killed run's session still alive", p)
	}
	d, err := New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: base}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.GC(context.Background(), "kill9")
	if err != nil || n != 1 {
		t.Fatalf("gc removed %d folders, err %v; want 1", n, err)
	}
	if ents, _ := os.ReadDir(base); len(ents) != 0 {
		t.Errorf("base folder not empty after gc: %v", ents)
	}
}
