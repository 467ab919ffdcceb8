package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCaptureSmall(t *testing.T) {
	c := NewCapture(10)
	_, _ = c.Write([]byte("hello"))
	_, _ = c.Write([]byte(" you"))
	if s, cut := c.Text(); s != "hello you" || cut {
		t.Fatalf("got %q %v", s, cut)
	}
	c = NewCapture(10)
	_, _ = c.Write([]byte("0123456789"))
	if s, cut := c.Text(); s != "0123456789" || cut {
		t.Fatalf("exactly max: %q %v", s, cut)
	}
}

func TestCaptureHeadTail(t *testing.T) {
	for _, chunk := range []int{1, 3, 7, 64, 1000, 1 << 20} {
		c := NewCapture(100)
		var all strings.Builder
		for i := range 5000 {
			fmt.Fprintf(&all, "%05d\n", i)
		}
		data := []byte(all.String())
		for len(data) > 0 {
			n := min(chunk, len(data))
			_, _ = c.Write(data[:n])
			data = data[n:]
		}
		s, cut := c.Text()
		want := fmt.Sprintf(TruncationMarker, all.Len()-100)
		if !cut || !strings.HasPrefix(s, all.String()[:50]) || !strings.HasSuffix(s, all.String()[all.Len()-50:]) || !strings.Contains(s, want) {
			t.Fatalf("chunk %d: got %q", chunk, s)
		}
		if c.Total() != int64(all.Len()) {
			t.Fatalf("total %d", c.Total())
		}
	}
}

func TestCaptureRunesAndBinary(t *testing.T) {
	s, cut := Cut(strings.Repeat("é€😀", 1000), 101)
	if !cut || !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
		t.Fatalf("cut inside a rune: %q", s)
	}
	s, _ = Cut("a\xff\xfeb", 100)
	if s != "a\uFFFDb" {
		t.Fatalf("binary: %q", s)
	}
}

type nopDriver struct{}

func (nopDriver) Open(context.Context, Spec) (Session, error) { return nil, errors.New("nop") }

type gcDriver struct{ nopDriver }

func (gcDriver) GC(_ context.Context, run string) (int, error) { return len(run), nil }

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	var got Config
	r.Register("b", func(cfg Config) (Driver, error) { got = cfg; return gcDriver{}, nil })
	r.Register("a", func(Config) (Driver, error) { return nil, errors.New("daemon down") })
	if s := r.Schemes(); strings.Join(s, ",") != "a,b" {
		t.Fatalf("schemes %v", s)
	}
	d, err := r.Open("b", Config{RunID: "run"})
	if err != nil || got.RunID != "run" {
		t.Fatalf("Open: %v %+v", err, got)
	}
	if n, err := GC(context.Background(), d, "abc"); n != 3 || err != nil {
		t.Fatalf("GC: %d %v", n, err)
	}
	if _, err := GC(context.Background(), nopDriver{}, ""); err == nil {
		t.Fatal("GC on a driver without Collector succeeded")
	}
	if _, err := r.Open("a", Config{}); err == nil || !strings.Contains(err.Error(), "daemon down") {
		t.Fatalf("factory error: %v", err)
	}
	if _, err := r.Open("zzz", Config{}); err == nil || !strings.Contains(err.Error(), "known: [a b]") {
		t.Fatalf("unknown scheme: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate Register did not panic")
		}
	}()
	r.Register("a", func(Config) (Driver, error) { return nil, nil })
}

func TestResolve(t *testing.T) {
	s := Resolve(Spec{}, Config{})
	if s.Timeout != DefaultTimeout || s.MaxOutput != DefaultMaxOutput {
		t.Fatalf("%+v", s)
	}
	s = Resolve(Spec{MaxOutput: 5}, Config{DefaultTimeout: 7, MaxOutput: 9})
	if s.Timeout != 7 || s.MaxOutput != 5 {
		t.Fatalf("%+v", s)
	}
}

func TestShellQuote(t *testing.T) {
	if q := ShellQuote("it's"); q != `'it'\''s'` {
		t.Fatal(q)
	}
}

func BenchmarkCapture10MB(b *testing.B) {
	chunk := []byte(strings.Repeat("x", 32<<10))
	for b.Loop() {
		c := NewCapture(DefaultMaxOutput)
		for range 320 {
			_, _ = c.Write(chunk)
		}
		_, _ = c.Text()
	}
}
