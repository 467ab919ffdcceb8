package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a goroutine-safe stdout for run.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeUntilSignal(t *testing.T) {
	dir := t.TempDir()
	scripts := filepath.Join(dir, "s.json")
	if err := os.WriteFile(scripts, []byte(`{"scripts":[{"name":"hi","match":"hello","steps":[{"content":"hi there"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(dir, "addr")
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--addr", "127.0.0.1:0", "--addr-file", addrFile, "--scripts", scripts, "--seed", "4", "--summary-words", "3"}, out)
	}()
	var addr string
	deadline := time.Now().Add(time.Minute)
	for addr == "" {
		if time.Now().After(deadline) {
			t.Fatal("no address file")
		}
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		default:
		}
		if b, err := os.ReadFile(addrFile); err == nil {
			addr = strings.TrimSpace(string(b))
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 || r.Choices[0].Message.Content != "hi there" {
		t.Fatalf("reply %s (%v)", b, err)
	}
	if !strings.Contains(out.String(), "listening on http://"+addr+"\n") {
		t.Fatalf("stdout %q", out.String())
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("SIGTERM did not stop the server")
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--fail-429", "2"},
		{"--reasoning-field", "thoughts"},
		{"--nope"},
		{"extra"},
	} {
		if err := run(args, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v", args, err)
		}
	}
	if err := run([]string{"--scripts", "/does/not/exist.json"}, io.Discard); err == nil || errors.Is(err, errUsage) {
		t.Errorf("missing scripts file: %v", err)
	}
}
