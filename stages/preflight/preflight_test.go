package preflight

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker/dockertest"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

func TestMain(m *testing.M) {
	defer dockertest.Done()
	m.Run()
}

// countingChecker reports images in missing as unavailable and counts how
// often each image was asked for.
type countingChecker struct {
	mu      sync.Mutex
	asked   map[string]int
	calls   atomic.Int64
	missing map[string]error
	delay   time.Duration
}

func (c *countingChecker) CheckImages(ctx context.Context, images []string) map[string]error {
	c.calls.Add(1)
	time.Sleep(c.delay)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.asked == nil {
		c.asked = map[string]int{}
	}
	out := map[string]error{}
	for _, img := range images {
		c.asked[img]++
		if err, ok := c.missing[img]; ok {
			out[img] = err
		}
	}
	return out
}

func row(i int, image string) *schemas.Record {
	return &schemas.Record{Key: fmt.Sprint(i), PromptIndex: i, Input: &schemas.InputRow{Index: i, Prompt: "p", Image: image}}
}

func TestCheckDistinct(t *testing.T) {
	c := &countingChecker{missing: map[string]error{"b": errors.New("pull failed")}}
	res := Check(context.Background(), []string{"a", "b", "a", "", "c", "b"}, Options{Checker: c, DefaultImage: "d"})
	if strings.Join(res.Images, ",") != "a,b,c,d" {
		t.Fatalf("images %v", res.Images)
	}
	if c.calls.Load() != 1 || c.asked["a"] != 1 {
		t.Fatalf("checker asked %d times: %v", c.calls.Load(), c.asked)
	}
	if res.OK() || len(res.Missing) != 1 || res.Err("a") != nil {
		t.Fatalf("missing %v", res.Missing)
	}
	if err := res.Err("b"); err == nil || err.Error() != "image unavailable: b: pull failed" {
		t.Fatalf("Err(b) = %v", err)
	}
	if res := Check(context.Background(), []string{"x"}, Options{}); res.OK() {
		t.Fatal("no checker must make images unavailable")
	}
}

func TestStageMarksRows(t *testing.T) {
	c := &countingChecker{missing: map[string]error{"bad": errors.New("not present")}, delay: 20 * time.Millisecond}
	s, err := New(Options{Checker: c}, []string{"good", "bad"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Preflight(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := s.Process(ctx, row(0, "good"))
	if err != nil || len(out) != 1 || out[0].Outcome != "" {
		t.Fatalf("good row: %+v %v", out, err)
	}
	out, _ = s.Process(ctx, row(1, "bad"))
	if out[0].Outcome != schemas.OutcomeSandboxError || out[0].Error != "image unavailable: bad: not present" || !out[0].Outcome.Retryable() {
		t.Fatalf("bad row: %+v", out[0])
	}
	out, _ = s.Process(ctx, row(2, ""))
	if out[0].Outcome != "" {
		t.Fatalf("row without image marked: %+v", out[0])
	}
	// An image first seen in Process is checked once, even by many workers.
	c.missing["late-bad"] = errors.New("gone")
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := s.Process(ctx, row(i, "late-bad"))
			if err != nil || out[0].Outcome != schemas.OutcomeSandboxError {
				t.Errorf("late row: %+v %v", out, err)
			}
		}()
	}
	wg.Wait()
	if c.asked["late-bad"] != 1 || c.asked["good"] != 1 {
		t.Fatalf("asked %v", c.asked)
	}
	if m := s.Missing(); len(m) != 2 {
		t.Fatalf("Missing() = %v", m)
	}
}

func TestStageCancelled(t *testing.T) {
	c := &countingChecker{delay: 10 * time.Millisecond}
	s, _ := New(Options{Checker: c}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Process(ctx, row(0, "img")); err == nil {
		t.Fatal("Process with a cancelled ctx returned no error")
	}
}

// dockerDriver returns a docker driver on the test daemon.
func dockerDriver(t testing.TB) *docker.Driver {
	t.Helper()
	dockertest.Require(t)
	d, err := docker.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Release() })
	return d
}

// loadForeignImage loads a one-layer image whose config says linux/arm64 (or
// amd64 when the daemon is arm64) under name, with docker load.
func loadForeignImage(t *testing.T, cli *client.Client, name string) {
	t.Helper()
	info, err := cli.Info(context.Background(), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	arch := "arm64"
	if strings.Contains(info.Info.Architecture, "aarch64") || info.Info.Architecture == "arm64" {
		arch = "amd64"
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	_ = lw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
	_, _ = lw.Write([]byte("hi"))
	_ = lw.Close()
	layerSum := sha256.Sum256(layer.Bytes())
	cfg, _ := json.Marshal(map[string]any{
		"architecture": arch, "os": "linux", "config": map[string]any{},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(layerSum[:])}},
	})
	cfgSum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
	manifest, _ := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{name}, "Layers": []string{"layer/layer.tar"}}})
	var archive bytes.Buffer
	aw := tar.NewWriter(&archive)
	for _, f := range []struct {
		name string
		data []byte
	}{{"layer/layer.tar", layer.Bytes()}, {cfgName, cfg}, {"manifest.json", manifest}} {
		_ = aw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
		_, _ = aw.Write(f.data)
	}
	_ = aw.Close()
	res, err := cli.ImageLoad(context.Background(), &archive, client.ImageLoadWithQuiet(true))
	if err != nil {
		t.Fatalf("load foreign image: %v", err)
	}
	_, _ = io.Copy(io.Discard, res)
	_ = res.Close()
}

func TestDockerCheck(t *testing.T) {
	d := dockerDriver(t)
	foreign := "hermes-pipe-test/foreign-platform:latest"
	loadForeignImage(t, d.Client(), foreign)
	missing := "hermes-pipe-test/does-not-exist:1"
	start := time.Now()
	res := Check(context.Background(), []string{dockertest.Image(), missing, foreign, dockertest.Image()}, Options{Checker: d, Timeout: time.Minute})
	t.Logf("checked %v in %v: %v", res.Images, time.Since(start), res.Missing)
	if res.Err(dockertest.Image()) != nil {
		t.Errorf("test image reported unavailable: %v", res.Err(dockertest.Image()))
	}
	if err := res.Err(missing); err == nil || !strings.Contains(err.Error(), "pull failed") {
		t.Errorf("missing image: %v", err)
	}
	if err := res.Err(foreign); err == nil || !strings.Contains(err.Error(), "platform") {
		t.Errorf("foreign-platform image: %v", err)
	}
	// NoPull reports without pulling.
	m := d.CheckImagesWith(context.Background(), []string{missing}, docker.ImageOptions{NoPull: true})
	if err := m[missing]; err == nil || !strings.Contains(err.Error(), "pulling is disabled") {
		t.Errorf("NoPull: %v", m)
	}
}

func TestDockerUnavailable(t *testing.T) {
	d, err := docker.New(sandbox.Config{Docker: sandbox.DockerConfig{Host: "unix:///nonexistent/docker.sock"}})
	if err != nil {
		t.Fatal(err)
	}
	res := Check(context.Background(), []string{"a", "b"}, Options{Checker: d})
	if len(res.Missing) != 2 || !errors.Is(res.Missing["a"], sandbox.ErrUnavailable) {
		t.Fatalf("missing %v", res.Missing)
	}
}

// BenchmarkPreflight10kRows is the figure: 10,000 rows over 20
// distinct images, all present, through Check and the stage's Process.
func BenchmarkPreflight10kRows(b *testing.B) {
	d := dockerDriver(b)
	cli := d.Client()
	base := dockertest.Image()
	var images []string
	for i := range 20 {
		name := fmt.Sprintf("hermes-pipe-test/bench-%d:latest", i)
		if _, err := cli.ImageTag(context.Background(), client.ImageTagOptions{Source: base, Target: name}); err != nil {
			b.Fatal(err)
		}
		images = append(images, name)
	}
	rows := make([]*schemas.Record, 10_000)
	rowImages := make([]string, len(rows))
	for i := range rows {
		rowImages[i] = images[i%len(images)]
		rows[i] = row(i, rowImages[i])
	}
	ctx := context.Background()
	for b.Loop() {
		s, _ := New(Options{Checker: d}, rowImages)
		if err := s.Preflight(ctx); err != nil {
			b.Fatal(err)
		}
		for _, r := range rows {
			r.Outcome = ""
			if _, err := s.Process(ctx, r); err != nil || r.Outcome != "" {
				b.Fatalf("row %s: %v %s", r.Key, err, r.Error)
			}
		}
	}
}

func TestRequireImageMarksRowsWithoutOne(t *testing.T) {
	c := &countingChecker{missing: map[string]error{}}
	ctx := context.Background()
	s, err := New(Options{Checker: c, RequireImage: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := s.Process(ctx, row(0, ""))
	if out[0].Outcome != schemas.OutcomeSandboxError || !strings.Contains(out[0].Error, "names no image and no default image is set") {
		t.Fatalf("row without image, none required by default: %+v", out[0])
	}
	// With a default image, such rows run in it.
	s, _ = New(Options{Checker: c, RequireImage: true, DefaultImage: "base"}, nil)
	if out, _ = s.Process(ctx, row(1, "")); out[0].Outcome != "" {
		t.Fatalf("row without image but with a default: %+v", out[0])
	}
}
