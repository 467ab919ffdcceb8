package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker/dockertest"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	defer dockertest.Done()
	m.Run()
}

// newDriver returns a driver on the test daemon, or skips.
func newDriver(t testing.TB, cfg sandbox.Config) *Driver {
	t.Helper()
	dockertest.Require(t)
	if cfg.Docker.DefaultImage == "" {
		cfg.Docker.DefaultImage = dockertest.Image()
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Release() })
	return d
}

// containers lists containers carrying label=value.
func containers(t testing.TB, d *Driver, label, value string) []string {
	t.Helper()
	list, err := d.cli.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", label+"="+value),
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// TestConformance runs the shared suite over the long-lived shell in a
// busybox image and in a bash image, and over one exec per command
// (ShellMode "fresh"). The escape battery sets variables in the test
// process's environment, so the three do not run in parallel.
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name, image, mode string
	}{
		{"busybox", dockertest.Image(), ""},
		{"bash", dockertest.BashImage(), ""},
		{"fresh", dockertest.Image(), "fresh"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.name != "busybox" {
				t.Skip("short")
			}
			d := newDriver(t, sandbox.Config{ShellMode: c.mode, Docker: sandbox.DockerConfig{DefaultImage: c.image}})
			long := c.mode != sandbox.ShellFresh
			sandboxtest.Run(t, func(*testing.T) sandbox.Driver { return d }, sandboxtest.Caps{
				Shell:          true,
				Cwd:            "/tmp",
				Confined:       true,
				MaxProcs:       DefaultPidsLimit,
				LongLivedShell: long,
				Aliases:        long,
				AfterClose: func(t *testing.T, spec sandbox.Spec, s sandbox.Session) {
					if ids := containers(t, d, LabelRollout, spec.RolloutID); len(ids) > 0 {
						t.Errorf("containers %v of the closed session remain", ids)
					}
				},
			})
		})
	}
}

func open(t *testing.T, d *Driver, spec sandbox.Spec) *Session {
	t.Helper()
	if spec.RolloutID == "" {
		spec.RolloutID = strings.ReplaceAll(t.Name(), "/", "-")
	}
	if spec.RunID == "" {
		spec.RunID = "dockertest"
	}
	s, err := d.Open(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s.(*Session)
}

func exec1(t *testing.T, s sandbox.Session, cmd string) sandbox.Result {
	t.Helper()
	res, err := s.Exec(context.Background(), sandbox.Cmd{Command: cmd})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	return res
}

func TestSecureDefaults(t *testing.T) {
	t.Parallel()
	d := newDriver(t, sandbox.Config{})
	s := open(t, d, sandbox.Spec{RunID: "defaults-run"})
	in, err := d.cli.ContainerInspect(context.Background(), s.id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := in.Container.HostConfig
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Contains(hc.SecurityOpt, "no-new-privileges") ||
		hc.PidsLimit == nil || *hc.PidsLimit != 256 || hc.Memory != 512<<20 || hc.NanoCPUs != 1e9 || hc.NetworkMode != "none" {
		t.Fatalf("host config not secure by default: capdrop %v secopt %v pids %v mem %d cpus %d net %s",
			hc.CapDrop, hc.SecurityOpt, hc.PidsLimit, hc.Memory, hc.NanoCPUs, hc.NetworkMode)
	}
	labels := in.Container.Config.Labels
	if labels[LabelRun] != "defaults-run" || labels[LabelRollout] != s.spec.RolloutID {
		t.Fatalf("labels %v", labels)
	}
	seccompOpt := slices.ContainsFunc(hc.SecurityOpt, func(o string) bool {
		return strings.HasPrefix(o, "seccomp=") && !strings.Contains(o, `"ptrace"`) && strings.Contains(o, `"read"`)
	})
	if !seccompOpt {
		t.Errorf("no seccomp profile without ptrace in %d security options", len(hc.SecurityOpt))
	}
	// Seen from inside: no capabilities, a seccomp filter, no network
	// interface but lo.
	res := exec1(t, s, "grep CapEff /proc/self/status; ls /sys/class/net; grep Seccomp: /proc/self/status")
	if !strings.Contains(res.Stdout, "CapEff:\t0000000000000000") || strings.TrimSpace(strings.SplitN(res.Stdout, "\n", 3)[1]) != "lo" ||
		!strings.Contains(res.Stdout, "Seccomp:\t2") {
		t.Fatalf("inside view: %q", res.Stdout)
	}
}

func TestOverrides(t *testing.T) {
	t.Parallel()
	d := newDriver(t, sandbox.Config{Docker: sandbox.DockerConfig{
		PidsLimit: 64, MemoryBytes: 256 << 20, CPUs: 0.5, CapAdd: []string{"CHOWN"}, AllowNewPrivileges: true,
	}})
	s := open(t, d, sandbox.Spec{})
	in, err := d.cli.ContainerInspect(context.Background(), s.id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := in.Container.HostConfig
	if *hc.PidsLimit != 64 || hc.Memory != 256<<20 || hc.NanoCPUs != 5e8 || slices.Contains(hc.SecurityOpt, "no-new-privileges") || !(slices.Equal(hc.CapAdd, []string{"CHOWN"}) || slices.Equal(hc.CapAdd, []string{"CAP_CHOWN"})) {
		t.Fatalf("overrides not applied: pids %d secopt %v capadd %v %+v", *hc.PidsLimit, hc.SecurityOpt, hc.CapAdd, hc.Resources)
	}
}

func TestPidsLimitHolds(t *testing.T) {
	t.Parallel()
	d := newDriver(t, sandbox.Config{Docker: sandbox.DockerConfig{PidsLimit: 20}})
	s := open(t, d, sandbox.Spec{})
	res, err := s.Exec(context.Background(), sandbox.Cmd{Command: "for i in $(seq 1 40); do sleep 30 & done; sleep 1; echo spawned", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stderr, "fork") && !strings.Contains(res.Stderr, "resource") {
		t.Fatalf("expected fork failures past the pids limit, got %+v", res)
	}
	// The session stays usable after the epilogue killed the sleeps.
	if r := exec1(t, s, "echo ok"); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("session unusable: %+v", r)
	}
}

func TestCwdAndEnv(t *testing.T) {
	t.Parallel()
	d := newDriver(t, sandbox.Config{})
	s := open(t, d, sandbox.Spec{Cwd: "/work/repo", Env: map[string]string{"A": "1"}})
	if r := exec1(t, s, "pwd; echo $A"); r.Stdout != "/work/repo\n1\n" {
		t.Fatalf("got %q", r.Stdout)
	}
}

func TestMissingImage(t *testing.T) {
	t.Parallel()
	d := newDriver(t, sandbox.Config{})
	_, err := d.Open(context.Background(), sandbox.Spec{Image: "hermes-pipe-test/does-not-exist:1", RolloutID: "missing"})
	if err == nil {
		t.Fatal("Open with a missing image succeeded")
	}
	if ids := containers(t, d, LabelRollout, "missing"); len(ids) > 0 {
		t.Fatalf("containers left: %v", ids)
	}
}

func TestDaemonUnavailable(t *testing.T) {
	t.Parallel()
	d, err := New(sandbox.Config{Docker: sandbox.DockerConfig{Host: "unix:///nonexistent/docker.sock", DefaultImage: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Open(context.Background(), sandbox.Spec{})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Open on a missing daemon: %v, want ErrUnavailable", err)
	}
	if err := d.Ping(context.Background()); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Ping: %v", err)
	}
}

// TestContainerGone simulates the daemon losing the container mid-run: Exec
// must report ErrUnavailable, not a command failure.
func TestContainerGone(t *testing.T) {
	t.Parallel()
	d := newDriver(t, sandbox.Config{})
	s := open(t, d, sandbox.Spec{})
	if _, err := d.cli.ContainerRemove(context.Background(), s.id, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Exec(context.Background(), sandbox.Cmd{Command: "true"})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Exec in a removed container: %v, want ErrUnavailable", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close of a removed container: %v", err)
	}
}

func TestCloseAfterCancel(t *testing.T) {
	t.Parallel()
	d := newDriver(t, sandbox.Config{})
	s := open(t, d, sandbox.Spec{RolloutID: "close-after-cancel"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close with a cancelled ctx: %v", err)
	}
	if ids := containers(t, d, LabelRollout, "close-after-cancel"); len(ids) > 0 {
		t.Fatalf("container left after Close with cancelled ctx")
	}
}

func TestGC(t *testing.T) {
	t.Parallel()
	d := newDriver(t, sandbox.Config{})
	run := fmt.Sprintf("gc-%d", time.Now().UnixNano())
	for i := range 3 {
		s, err := d.Open(context.Background(), sandbox.Spec{RunID: run, RolloutID: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		_ = s // left open, as after kill -9
	}
	other := open(t, d, sandbox.Spec{RunID: run + "-other"})
	n, err := d.GC(context.Background(), run)
	if err != nil || n != 3 {
		t.Fatalf("GC = %d, %v; want 3", n, err)
	}
	if ids := containers(t, d, LabelRun, run); len(ids) > 0 {
		t.Fatalf("containers left: %v", ids)
	}
	if r := exec1(t, other, "echo alive"); strings.TrimSpace(r.Stdout) != "alive" {
		t.Fatal("GC touched another run")
	}
}

// TestConcurrentSessions is the "50 concurrent docker rollouts" benchmark
// as a test: every session runs commands and is closed, and no container of
// the run remains.
func TestConcurrentSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	d := newDriver(t, sandbox.Config{})
	run := fmt.Sprintf("conc-%d", time.Now().UnixNano())
	const n = 50
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			s, err := d.Open(ctx, sandbox.Spec{RunID: run, RolloutID: fmt.Sprint(i)})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close(ctx)
			for _, c := range []string{"cd /tmp && export N=" + fmt.Sprint(i), "echo $N; pwd"} {
				res, err := s.Exec(ctx, sandbox.Cmd{Command: c})
				if err != nil {
					errs <- err
					return
				}
				if strings.HasPrefix(c, "echo") && res.Stdout != fmt.Sprintf("%d\n/tmp\n", i) {
					errs <- fmt.Errorf("session %d: %q", i, res.Stdout)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d concurrent sessions (open, 2 commands, close) in %v", n, time.Since(start))
	if ids := containers(t, d, LabelRun, run); len(ids) > 0 {
		t.Fatalf("%d containers leaked", len(ids))
	}
}

// TestDaemonStopsMidRun stops a private dockerd while a command runs: Exec
// and later Opens must fail with ErrUnavailable (outcome sandbox_error,
// retried by --resume), not report a command result.
func TestDaemonStopsMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dockertest.Require(t)
	dir, err := os.MkdirTemp("", "hermes-dockerd-stop-")
	if err != nil {
		t.Fatal(err)
	}
	sock := "unix://" + filepath.Join(dir, "docker.sock")
	script := func(arg string) error {
		cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "dockerd.sh"), arg)
		cmd.Env = append(os.Environ(), "HERMES_DOCKERD_DIR="+dir, "DOCKER_HOST="+sock)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("dockerd.sh %s: %v: %s", arg, err, out)
		}
		return nil
	}
	if err := script("start"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = script("stop")
		_ = os.RemoveAll(dir)
	})
	d := newDriver(t, sandbox.Config{Docker: sandbox.DockerConfig{Host: sock}})
	s, err := d.Open(context.Background(), sandbox.Spec{RunID: "stop", RolloutID: "stop"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	exec1(t, s, "echo up")
	done := make(chan error, 1)
	go func() {
		res, err := s.Exec(context.Background(), sandbox.Cmd{Command: "sleep 1000"})
		if err == nil {
			t.Logf("result while stopping: %+v", res)
		}
		done <- err
	}()
	waitProcess(t, d, s.(*Session), "sleep 1000")
	if err := script("stop"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, sandbox.ErrUnavailable) {
			t.Fatalf("Exec while dockerd stopped: %v, want ErrUnavailable", err)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("Exec did not return 120 s after dockerd stopped")
	}
	if _, err := d.Open(context.Background(), sandbox.Spec{}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Open with dockerd stopped: %v", err)
	}
}

// TestCloseDuringExec checks that Close removes the container at once, ending
// a running command with an error.
func TestCloseDuringExec(t *testing.T) {
	t.Parallel()
	d := newDriver(t, sandbox.Config{})
	s := open(t, d, sandbox.Spec{RolloutID: "close-during-exec"})
	done := make(chan error, 1)
	go func() {
		_, err := s.Exec(context.Background(), sandbox.Cmd{Command: "sleep 1000"})
		done <- err
	}()
	waitProcess(t, d, s, "sleep 1000")
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, sandbox.ErrClosed) {
			t.Fatalf("Exec cut by Close returned %v, want sandbox.ErrClosed", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Exec still running 60 s after Close")
	}
	if ids := containers(t, d, LabelRollout, "close-during-exec"); len(ids) > 0 {
		t.Fatalf("container left")
	}
}

// waitProcess polls the container's process list until a process whose
// command line is cmd runs, so a test acts while a command is known to run
// (a fixed sleep is too short on a loaded machine). It fails t after 60 s.
func waitProcess(t *testing.T, d *Driver, s *Session, cmd string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		top, err := d.cli.ContainerTop(context.Background(), s.id, client.ContainerTopOptions{})
		if err == nil {
			col := slices.Index(top.Titles, "CMD")
			if col < 0 {
				col = slices.Index(top.Titles, "COMMAND")
			}
			for _, p := range top.Processes {
				if col >= 0 && col < len(p) && strings.Contains(p[col], cmd) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process %q in the container after 60 s (last error %v)", cmd, err)
		}
	}
}

// TestShellMode checks that commands share one shell by default and get
// one each in ShellMode "fresh", and that an unknown mode is refused.
func TestShellMode(t *testing.T) {
	t.Parallel()
	if _, err := New(sandbox.Config{ShellMode: "forever"}); err == nil {
		t.Fatal("New accepted shell mode \"forever\"")
	}
	for _, mode := range []string{"", "persistent", "fresh"} {
		d := newDriver(t, sandbox.Config{ShellMode: mode})
		s := open(t, d, sandbox.Spec{RolloutID: "shell-mode-" + mode})
		a, b := exec1(t, s, "echo $$").Stdout, exec1(t, s, "echo $$").Stdout
		if same := a == b; same != (mode != sandbox.ShellFresh) {
			t.Errorf("mode %q: shell pids %q and %q", mode, a, b)
		}
	}
}
