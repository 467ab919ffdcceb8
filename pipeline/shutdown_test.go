package pipeline

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestShutdownOnSignal(t *testing.T) {
	var mu sync.Mutex
	var msgs []string
	notify := func(m string) {
		mu.Lock()
		msgs = append(msgs, m)
		mu.Unlock()
	}
	// First signal: soft stop, then the grace period cancels. The grace is
	// long enough that a loaded machine sees the context still alive between
	// the stop and the check below.
	ctx, stop, release := ShutdownOnSignal(context.Background(), 3*time.Second, notify)
	syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
	select {
	case <-stop:
	case <-time.After(30 * time.Second):
		t.Fatal("no soft stop after the first signal")
	}
	if ctx.Err() != nil {
		t.Fatal("context cancelled before the grace period")
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("grace period did not cancel the context")
	}
	release()

	// Second signal: immediate hard stop.
	ctx, stop, release = ShutdownOnSignal(context.Background(), time.Hour, notify)
	defer release()
	syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	<-stop
	syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("second signal did not cancel the context")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(msgs) != 4 || !strings.Contains(msgs[1], "grace period") || !strings.Contains(msgs[3], "again: stopping now") {
		t.Fatalf("messages %q", msgs)
	}
}
