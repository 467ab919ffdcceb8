package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/sandboxtest"
	"golang.org/x/sys/unix"
)

// dirtyRow is what a previous row does to a session, everything a later
// row must not see: files in its folder, /tmp and the sandbox's own file
// systems (one in a folder without permissions), a variable, a function,
// an alias, a trap, shell options, umask, a changed working folder,
// background and setsid processes, System V IPC objects and a POSIX message
// queue. TAG names the processes so the test finds them on the host.
const dirtyRow = `set -e
echo prev >"$HOME/prevfile"; mkdir -p "$HOME/sub/deep"; echo prev >"$HOME/sub/deep/f"
echo prev >/tmp/prevtmp; mkdir -p /tmp/prevdir/x
echo prev >/dev/shm/prevshm; echo prev >/prevroot; mkdir /prevrootdir; echo prev >/dev/prevdev
: >/dev/mqueue/prevq
ipcmk -M 4096 >/dev/null; ipcmk -Q >/dev/null; ipcmk -S 2 >/dev/null
echo prev >"$HOME/../prevtop"
mkdir "$HOME/locked"; echo prev >"$HOME/locked/f"; chmod 000 "$HOME/locked"
export PREV_VAR=leak; prevfn() { echo leak; }; alias prevalias='echo leak'; trap 'echo leak' USR2
set -o noclobber; shopt -s extglob; umask 027
cd "$HOME/sub"
sh -c 'sleep 1000; :' TAG-bg >/dev/null 2>&1 &
(setsid sh -c 'sleep 1000; :' TAG-setsid >/dev/null 2>&1 &)
nohup sh -c 'sleep 1000; :' TAG-nohup >/dev/null 2>&1 &
set +e`

// stateProbe prints what a row sees of the session's state, in a form
// that is the same in every pristine session of one driver folder (no pid,
// no random name).
const stateProbe = `echo "cwd=${PWD#$HOME}"
echo "PREV_VAR=${PREV_VAR-unset}"; env | cut -d= -f1 | sort | tr '\n' ' '; echo
for d in "$HOME" "$HOME/.." /tmp /dev/shm /dev/mqueue / /dev; do echo "$d:"; ls -A "$d" | grep -v '^hermes-sbx-' | tr '\n' ' '; echo; done
echo "functions:"; declare -F | grep -v ' __hs_'
echo "aliases:"; alias
echo "traps:"; trap -p | grep -v __hs_save
echo "umask=$(umask) opts=$- $(shopt -po noclobber) $(shopt -p extglob) $(shopt -p dotglob)"
echo "PATH=$PATH OLDPWD=${OLDPWD-unset} LC_ALL=${LC_ALL-unset} dirs=$(dirs -l)"; hash
echo "processes:"; for p in /proc/[0-9]*; do [ "${p#/proc/}" = "$BASHPID" ] && continue; read -r c <"$p/comm" && echo "$c"; done
echo "ipc:"; ipcs | grep -v '^-\|^key\|^$'
echo end`

// plainRow dirties a session only in ways a refresh in place undoes
// (sandbox.RefreshSafe): variables (exported, plain, bash's own), functions
// (some named like builtins), aliases, the folder and the folder stack,
// hashed commands, files, and background, setsid and nohup processes.
const plainRow = `echo prev >"$HOME/prevfile"; echo prev >/tmp/prevtmp; echo prev >/dev/shm/prevshm; echo prev >/prevroot
export PREV_VAR=leak; PLAIN=leak; prevfn() { echo leak; }; alias prevalias='echo leak'
unset() { echo leak; }; cd() { command cd "$@"; echo leak; }; wait() { echo leak; }
OLDPWD=/leak; LC_ALL=C; GLOBIGNORE='*.leak'; OPTIND=7
pushd / >/dev/null; mkdir -p "$HOME/sub"; command cd "$HOME/sub"
ls >/dev/null
sh -c 'sleep 1000; :' TAG-bg >/dev/null 2>&1 &
(setsid sh -c 'sleep 1000; :' TAG-setsid >/dev/null 2>&1 &)
nohup sh -c 'sleep 1000; :' TAG-nohup >/dev/null 2>&1 &
PATH=$PATH:/leak; IFS=:`

func poolDriver(t *testing.T, pool int) *Driver {
	t.Helper()
	d, err := New(sandbox.Config{RunID: "pooltest", Local: sandbox.LocalConfig{BaseDir: t.TempDir(), Pool: pool,
		Limits: sandbox.LocalLimits{Processes: 256, FileSizeBytes: 16 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Confined() {
		t.Fatal("default local driver is not confined")
	}
	t.Cleanup(func() {
		if err := d.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	})
	return d
}

func openIn(t *testing.T, d *Driver, spec sandbox.Spec) *Session {
	t.Helper()
	s, err := d.Open(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*Session)
}

// idle waits until n sessions are back in d's pool.
func idle(t *testing.T, d *Driver, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		d.pool.mu.Lock()
		got := d.pool.n
		d.pool.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions in the pool, want %d", got, n)
		}
	}
}

// TestReusedSessionShowsNothingOfPreviousRow: a row dirties its session
// in every way a row can; the next row gets the same sandbox (same folder,
// no new bwrap) and sees exactly what the first row saw when it was new,
// and the first row's processes are gone from the host.
func TestReusedSessionShowsNothingOfPreviousRow(t *testing.T) {
	d := poolDriver(t, 0)
	spec := sandbox.Spec{Env: map[string]string{"ROW_ENV": "x"}}
	a := openIn(t, d, spec)
	pristine := exec1(t, a, stateProbe, 0)
	if pristine.ExitCode != 0 || !strings.HasSuffix(pristine.Stdout, "end\n") {
		t.Fatalf("probe of a new session: %+v", pristine)
	}
	tag := "hermes-pool-" + strings.TrimPrefix(filepath.Base(a.Dir()), folderPrefix)
	if res := exec1(t, a, strings.ReplaceAll(dirtyRow, "TAG", tag), 0); res.ExitCode != 0 {
		t.Fatalf("dirtying the session: %+v", res)
	}
	dirty := exec1(t, a, stateProbe, 0).Stdout
	// The probe must see every kind of dirt, or its equality below proves
	// nothing.
	for _, w := range []string{"cwd=/sub", "PREV_VAR=leak", "prevfile", "prevtop", "prevtmp", "prevshm", "prevq", "prevroot", "prevrootdir",
		"prevdev", "prevfn", "prevalias", "USR2", "umask=0027", "set -o noclobber", "shopt -s extglob", "sleep", "0x"} {
		if !strings.Contains(dirty, w) {
			t.Errorf("the dirtied session's probe lacks %q:\n%s", w, dirty)
		}
	}
	if len(hostProcs(tag)) < 3 {
		t.Errorf("the dirtying row's processes are not running: %v", hostProcs(tag))
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(context.Background(), sandbox.Cmd{Command: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Exec on the closed handle: %v, want ErrClosed", err)
	}
	idle(t, d, 1)
	if p := hostProcs(tag); len(p) > 0 {
		t.Errorf("processes %v of the previous row alive in the pooled session", p)
	}
	b := openIn(t, d, spec)
	if !b.Reused() || b.Dir() != a.Dir() {
		t.Fatalf("second session reused=%v dir %s; want the first's %s reused", b.Reused(), b.Dir(), a.Dir())
	}
	if got := exec1(t, b, stateProbe, 0); got.Stdout != pristine.Stdout || got.Stderr != pristine.Stderr {
		t.Errorf("reused session differs from a new one:\n--- new\n%s%s\n--- reused\n%s%s", pristine.Stdout, pristine.Stderr, got.Stdout, got.Stderr)
	}
	// It works like a new one too.
	want := exec1(t, b, "cd /tmp && export B=1 && f() { echo fb; }; echo ok", 0)
	if want.Stdout != "ok\n" {
		t.Errorf("command in the reused session: %+v", want)
	}
	if res := exec1(t, b, `echo "$PWD $B $(f)"`, 0); res.Stdout != "/tmp 1 fb\n" {
		t.Errorf("state in the reused session: %+v", res)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRefreshInPlace: a row that changed only what a refresh undoes hands
// its shell on in place (the same process); rows that changed what it
// cannot undo, seen from inside (RANDOM unset) or from the host (the
// process's name), get a new shell. Either way the next row sees exactly
// what a new session shows.
func TestRefreshInPlace(t *testing.T) {
	for _, c := range []struct {
		name, row string
		inPlace   bool
	}{
		{"plain row", plainRow, true},
		{"RANDOM unset", "unset RANDOM; export PREV_VAR=leak", false},
		{"process renamed", "printf leak >/proc/$BASHPID/comm; export PREV_VAR=leak", false},
		{"niceness raised", "n=nice; re$n -n 7 -p $BASHPID >/dev/null; export PREV_VAR=leak", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !sandbox.RefreshSafe(c.row) {
				t.Fatalf("the row is not RefreshSafe: it would never be refreshed in place")
			}
			d := poolDriver(t, 0)
			a := openIn(t, d, sandbox.Spec{})
			pristine := exec1(t, a, stateProbe, 0)
			pid := exec1(t, a, "echo $BASHPID", 0).Stdout
			tag := "hermes-refresh-" + strings.TrimPrefix(filepath.Base(a.Dir()), folderPrefix)
			exec1(t, a, strings.ReplaceAll(c.row, "TAG", tag), 0)
			dirty := exec1(t, a, stateProbe, 0).Stdout
			if !strings.Contains(dirty, "PREV_VAR=leak") {
				t.Fatalf("the probe does not see the row's variable:\n%s", dirty)
			}
			if c.inPlace {
				for _, w := range []string{"cwd=/sub", "prevfile", "prevtmp", "prevshm", "prevroot", "prevfn", "prevalias",
					"unset", "/leak", "LC_ALL=C", "dotglob", "sleep"} {
					if !strings.Contains(dirty, w) {
						t.Errorf("the dirtied session's probe lacks %q:\n%s", w, dirty)
					}
				}
				if len(hostProcs(tag)) < 3 {
					t.Errorf("the row's processes are not running: %v", hostProcs(tag))
				}
			}
			// The probe reads the state with words RefreshSafe refuses (trap,
			// shopt); the row itself is safe, so the flag the probes set goes.
			a.box.mu.Lock()
			a.box.tainted = false
			a.box.mu.Unlock()
			if err := a.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			idle(t, d, 1)
			if p := hostProcs(tag); len(p) > 0 {
				t.Errorf("processes %v of the previous row alive in the pooled session", p)
			}
			b := openIn(t, d, sandbox.Spec{})
			defer b.Close(context.Background())
			if !b.Reused() {
				t.Fatal("the session was not reused")
			}
			if b.Refreshed() != c.inPlace {
				t.Errorf("refreshed in place = %v, want %v", b.Refreshed(), c.inPlace)
			}
			if got := exec1(t, b, "echo $BASHPID", 0).Stdout; (got == pid) != c.inPlace {
				t.Errorf("shell pid %q before, %q after: in place = %v, want %v", pid, got, got == pid, c.inPlace)
			}
			if got := exec1(t, b, stateProbe, 0); got.Stdout != pristine.Stdout || got.Stderr != pristine.Stderr {
				t.Errorf("reused session differs from a new one:\n--- new\n%s%s\n--- reused\n%s%s", pristine.Stdout, pristine.Stderr, got.Stdout, got.Stderr)
			}
		})
	}
}

// TestPoolDiscardsSessionThatFailsReset: a row that replaces a kept folder
// (its home) makes the reset fail; the session is closed for good (folder
// removed) and the next row gets a new one.
func TestPoolDiscardsSessionThatFailsReset(t *testing.T) {
	d := poolDriver(t, 0)
	a := openIn(t, d, sandbox.Spec{})
	exec1(t, a, `rm -rf "$HOME" && mkdir "$HOME" && echo prev >"$HOME/f"`, 0)
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(a.Dir()); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session folder %s is still there", a.Dir())
		}
	}
	b := openIn(t, d, sandbox.Spec{})
	defer b.Close(context.Background())
	if b.Reused() || b.Dir() == a.Dir() {
		t.Errorf("a session that failed its reset was reused")
	}
	if res := exec1(t, b, `ls -A "$HOME"`, 0); res.Stdout != "" {
		t.Errorf("new session's home: %q", res.Stdout)
	}
}

// TestPoolKeepsOnlyMatchingSpecs: a session serves only rows with the same
// Spec, never a row with its own working folder, and the pool keeps at most
// Pool sessions (the others are closed for good).
func TestPoolKeepsOnlyMatchingSpecs(t *testing.T) {
	d := poolDriver(t, 1)
	a := openIn(t, d, sandbox.Spec{Env: map[string]string{"K": "1"}})
	b := openIn(t, d, sandbox.Spec{Env: map[string]string{"K": "1"}})
	exec1(t, a, "true", 0)
	exec1(t, b, "true", 0)
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	idle(t, d, 1)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(b.Dir()); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a session beyond the pool's bound is still there: %s", b.Dir())
		}
	}
	c := openIn(t, d, sandbox.Spec{Env: map[string]string{"K": "2"}})
	defer c.Close(context.Background())
	e := openIn(t, d, sandbox.Spec{Env: map[string]string{"K": "1"}, Cwd: t.TempDir()})
	defer e.Close(context.Background())
	if c.Reused() || e.Reused() {
		t.Errorf("a pooled session served another Spec (reused: other env %v, own cwd %v)", c.Reused(), e.Reused())
	}
	f := openIn(t, d, sandbox.Spec{Env: map[string]string{"K": "1"}})
	defer f.Close(context.Background())
	if !f.Reused() || f.Dir() != a.Dir() {
		t.Errorf("the matching Spec did not get the pooled session")
	}
	if res := exec1(t, f, "echo $K", 0); res.Stdout != "1\n" {
		t.Errorf("K=%q in the reused session", res.Stdout)
	}
}

// TestReleaseClosesPooled: Release removes what the pooled sessions hold.
func TestReleaseClosesPooled(t *testing.T) {
	d, err := New(sandbox.Config{RunID: "pooltest", Local: sandbox.LocalConfig{BaseDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	a := openIn(t, d, sandbox.Spec{})
	exec1(t, a, "sleep 1000 &", 0)
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.Dir()); !os.IsNotExist(err) {
		t.Errorf("session folder %s still there after Release (stat err %v)", a.Dir(), err)
	}
	if p := waitNone(0, a.Marker()); len(p) > 0 {
		t.Errorf("processes %v alive after Release", p)
	}
	b := openIn(t, d, sandbox.Spec{})
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.Dir()); !os.IsNotExist(err) {
		t.Errorf("a session closed after Release was kept: %s", b.Dir())
	}
}

// TestConformanceReused runs the suite, escape battery included, on
// sessions that a dirtying row used before (each Open of the suite gets a
// reused session): a row that needs a new shell, and one whose shell is
// refreshed in place.
func TestConformanceReused(t *testing.T) {
	for _, c := range []struct {
		name, row string
		inPlace   bool
	}{{"new shell", dirtyRow, false}, {"refreshed", plainRow, true}} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			cfg := sandbox.Config{RunID: "reused", Local: sandbox.LocalConfig{BaseDir: base,
				Limits: sandbox.LocalLimits{Processes: 256, FileSizeBytes: 16 << 20}}}
			if _, err := New(cfg); err != nil {
				t.Fatal(err)
			}
			sandboxtest.Run(t, func(*testing.T) sandbox.Driver {
				return reusingDriver{t: t, cfg: cfg, row: c.row, inPlace: c.inPlace}
			}, sandboxtest.Caps{
				Shell:          true,
				SharedHost:     true,
				Cwd:            t.TempDir(),
				Confined:       true,
				MaxProcs:       cfg.Local.Limits.Processes,
				MaxFileSize:    cfg.Local.Limits.FileSizeBytes,
				LongLivedShell: true,
				Aliases:        true,
				AfterClose: func(t *testing.T, _ sandbox.Spec, s sandbox.Session) {
					ls := s.(reusedSession)
					if _, err := os.Stat(ls.Dir()); !os.IsNotExist(err) {
						t.Errorf("session folder %s still there (stat err %v)", ls.Dir(), err)
					}
					if p := alive(0, ls.Marker()); len(p) > 0 {
						t.Errorf("processes %v of the session still alive", p)
					}
				},
			})
		})
	}
}

// reusingDriver opens every session through a driver of its own whose
// first row dirtied it: the session returned is the reused one. Closing it
// releases that driver.
type reusingDriver struct {
	t       *testing.T
	cfg     sandbox.Config
	row     string
	inPlace bool // the row's shell must be refreshed in place
}

func (r reusingDriver) Open(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	d, err := New(r.cfg)
	if err != nil {
		return nil, err
	}
	first, err := d.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	if spec.Cwd == "" {
		if _, err := first.Exec(ctx, sandbox.Cmd{Command: strings.ReplaceAll(r.row, "TAG", "hermes-reused")}); err != nil {
			return nil, err
		}
	}
	if err := first.Close(ctx); err != nil {
		return nil, err
	}
	d.pool.wg.Wait()
	s, err := d.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	if spec.Cwd == "" && !s.(*Session).Reused() {
		return nil, errors.New("the second session of a Spec without Cwd was not reused")
	}
	if spec.Cwd == "" && s.(*Session).Refreshed() != r.inPlace {
		return nil, fmt.Errorf("the reused session's shell refreshed in place: %v, want %v", s.(*Session).Refreshed(), r.inPlace)
	}
	return reusedSession{s.(*Session), d}, nil
}

type reusedSession struct {
	*Session
	d *Driver
}

func (r reusedSession) Close(ctx context.Context) error {
	return errors.Join(r.Session.Close(ctx), r.d.Release())
}

// hostProcs lists the host processes whose command line contains s.
func hostProcs(s string) []int {
	var out []int
	for _, pid := range pids() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, pid)
		}
	}
	return out
}

// TestRefreshFindsIPCWithNoProcessLeft: a row that leaves System V IPC
// objects but no process lets the refresh skip the supervisor (the cgroup
// is empty but for the sandbox's own), so the state report must see the
// objects: the session gets a new shell, whose reset removes them, and
// the next row sees none.
func TestRefreshFindsIPCWithNoProcessLeft(t *testing.T) {
	const row = "ipcmk -M 4096 >/dev/null && ipcmk -Q >/dev/null && ipcmk -S 2 >/dev/null"
	if !sandbox.RefreshSafe(row) {
		t.Fatal("the row is not RefreshSafe: it would never be refreshed in place")
	}
	d := poolDriver(t, 0)
	a := openIn(t, d, sandbox.Spec{})
	const count = "tail -q -n +2 /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | wc -l"
	exec1(t, a, row, 0)
	if got := strings.TrimSpace(exec1(t, a, count, 0).Stdout); got != "3" {
		t.Fatalf("%s objects after the row, want 3", got)
	}
	b := reopen(t, d, a)
	if got := strings.TrimSpace(exec1(t, b, count, 0).Stdout); got != "0" {
		t.Errorf("%s System V IPC objects of the previous row in the reused session", got)
	}
	if b.Refreshed() {
		t.Error("the shell was refreshed in place though the row left IPC objects (want a new shell)")
	}
}

// TestRefreshScriptsOutOfReach: the scripts a refresh sources are written
// by the host into the session's engine folder, read-only in the sandbox at
// its own path and at engineMount. A row can change none of them, by shell
// or file tools, and a link it planted or a folder it replaced elsewhere
// never makes the host write through it; the next row is still refreshed.
func TestRefreshScriptsOutOfReach(t *testing.T) {
	for _, c := range []struct {
		name, row string
		inPlace   bool
	}{
		{"engine files", `for f in /.hs/q /.hs/r /.hs/s "$HOME/../engine/q" "$HOME/../engine/r"; do ln -sf VICTIM/file "$f"; echo 'echo planted' >>"$f"; rm -f "$f"; done
mv "$HOME/../engine" "$HOME/../moved"; rm -rf /.hs "$HOME/../engine"; ln -s VICTIM "$HOME/../engine/x"; true`, true},
		{"state folder replaced", `rm -rf "$HOME/../state" && ln -s VICTIM "$HOME/../state"`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			victim := t.TempDir()
			if err := os.WriteFile(filepath.Join(victim, "file"), []byte("kept"), 0o600); err != nil {
				t.Fatal(err)
			}
			row := strings.ReplaceAll(c.row, "VICTIM", victim)
			if !sandbox.RefreshSafe(row) {
				t.Fatal("the row is not RefreshSafe: it would never be refreshed in place")
			}
			d := poolDriver(t, 0)
			a := openIn(t, d, sandbox.Spec{})
			engine := filepath.Join(a.Dir(), engineDir)
			exec1(t, a, "true", 0) // the shell starts and reports its state through engine/r
			before := map[string]string{}
			if ents, err := os.ReadDir(engine); err != nil || len(ents) == 0 {
				t.Fatalf("engine folder before the row: %v %v", ents, err)
			} else {
				for _, e := range ents {
					b, _ := os.ReadFile(filepath.Join(engine, e.Name()))
					before[e.Name()] = string(b)
				}
			}
			exec1(t, a, row, 0)
			for _, p := range []string{engineMount + "/q", engineMount + "/new", filepath.Join(engine, "r")} {
				if err := a.WriteFile(context.Background(), p, []byte("echo planted"), 0o644); err == nil {
					t.Errorf("file tools wrote %s", p)
				}
			}
			for name, want := range before {
				if b, err := os.ReadFile(filepath.Join(engine, name)); err != nil || string(b) != want {
					t.Errorf("engine file %s changed by the row: %q %v", name, b, err)
				}
			}
			if err := a.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if c.inPlace {
				idle(t, d, 1)
				b := openIn(t, d, sandbox.Spec{})
				if !b.Reused() || !b.Refreshed() {
					t.Errorf("next row: reused %v, refreshed in place %v; want both", b.Reused(), b.Refreshed())
				}
				if r := exec1(t, b, "echo ok", 0); r.Stdout != "ok\n" {
					t.Errorf("next row printed %q", r.Stdout)
				}
				b.Close(context.Background())
			}
			// Whether the session comes back or is discarded, the reset is
			// over once Release returns.
			if err := d.Release(); err != nil {
				t.Logf("Release: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(victim, "file")); err != nil || string(b) != "kept" {
				t.Errorf("the file the link named holds %q (%v), want it untouched", b, err)
			}
			ents, _ := os.ReadDir(victim)
			for _, e := range ents {
				if e.Name() != "file" {
					t.Errorf("the host wrote %s in the folder the link named", e.Name())
				}
			}
		})
	}
}

// TestStateFilesNeutral: a reset keeps the shell's state files (env, cwd)
// with neutral content instead of removing them, unless a row changed them
// in another way than writing (here their mode: then they are removed);
// either way a shell that starts in the next row before its first command
// saved anything (the row's first command kills it) restores nothing of the
// previous row.
func TestStateFilesNeutral(t *testing.T) {
	for _, c := range []struct {
		name, row string
		kept      bool
	}{
		{"written", "", true},
		{"mode changed", `chmod 700 "$HOME/../state/env" "$HOME/../state/cwd"`, false}, // no umask makes 0700 of 0666
	} {
		t.Run(c.name, func(t *testing.T) {
			d := poolDriver(t, 0)
			a := openIn(t, d, sandbox.Spec{})
			row := `export PREV_VAR=leak; mkdir -p "$HOME/sub"; cd "$HOME/sub"; ` + c.row
			if res := exec1(t, a, row, 0); res.ExitCode != 0 {
				t.Fatalf("row: %+v", res)
			}
			b := reopen(t, d, a)
			if !b.Refreshed() {
				t.Fatal("the shell was not refreshed in place")
			}
			for _, f := range []string{"env", "cwd"} {
				got, err := os.ReadFile(filepath.Join(b.Dir(), "state", f))
				switch {
				case c.kept && (err != nil || string(got) != neutralState):
					t.Errorf("state file %s after the reset: %q, %v; want %q", f, got, err, neutralState)
				case !c.kept && !os.IsNotExist(err):
					t.Errorf("state file %s changed by the row is still there: %q, %v", f, got, err)
				}
			}
			if res := exec1(t, b, "kill -9 $$", 0); res.ExitCode != 137 {
				t.Fatalf("killing the shell: %+v", res)
			}
			if res := exec1(t, b, `echo "${PREV_VAR-unset} cwd=${PWD#$HOME} old=${OLDPWD-unset}"`, 0); res.Stdout != "unset cwd= old=unset\n" {
				t.Errorf("a new shell restored the previous row's state: %+v", res)
			}
		})
	}
}

// TestResetClearsUserAttributes: user attributes a row left on the folders
// that stay (its home, the sandbox's own /dev/shm) are gone for the next
// row. They are set from the host here: the test needs no attribute tool
// in the sandbox.
func TestResetClearsUserAttributes(t *testing.T) {
	d := poolDriver(t, 0)
	a := openIn(t, d, sandbox.Spec{})
	exec1(t, a, "true", 0)
	p := a.proc()
	paths := []string{filepath.Join(a.Dir(), "home"), "/proc/" + strconv.Itoa(p.sup) + "/root/dev/shm"}
	for _, q := range paths {
		if err := unix.Setxattr(q, "user.leak", []byte("prev"), 0); err != nil {
			if errors.Is(err, unix.ENOTSUP) {
				t.Skipf("no user attributes on %s here", q)
			}
			t.Fatal(err)
		}
	}
	reopen(t, d, a) // open while the attributes are checked
	for _, q := range paths {
		buf := make([]byte, 1024)
		n, err := unix.Listxattr(q, buf)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(buf[:n]), "user.leak") {
			t.Errorf("%s keeps the previous row's attribute", q)
		}
	}
}

// TestRefreshAfterNewShell: after a row whose shell had to be replaced (a
// new shell under the same supervisor), the next rows' shell is refreshed
// in place again: the driver follows the new shell's process.
func TestRefreshAfterNewShell(t *testing.T) {
	d := poolDriver(t, 0)
	rows := []struct {
		row     string
		inPlace bool // how the session this row closes is handed to the next
	}{{"unset RANDOM", false}, {"export A=1", true}, {"cd /", true}}
	s := openIn(t, d, sandbox.Spec{})
	var pid string
	for i, r := range rows {
		exec1(t, s, r.row, 0)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		idle(t, d, 1)
		s = openIn(t, d, sandbox.Spec{})
		if !s.Reused() || s.Refreshed() != r.inPlace {
			t.Fatalf("after row %d: reused %v, refreshed in place %v; want %v", i, s.Reused(), s.Refreshed(), r.inPlace)
		}
		got := exec1(t, s, "echo $BASHPID", 0).Stdout
		if r.inPlace && got != pid {
			t.Errorf("after row %d: shell %q, want the same %q", i, got, pid)
		}
		pid = got
	}
	s.Close(context.Background())
}

// reopen closes a, waits for it to be idle in d's pool and opens the next
// row's session, which must be a's, reused; it is closed at the test's end.
func reopen(t *testing.T, d *Driver, a *Session) *Session {
	t.Helper()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	idle(t, d, 1)
	b := openIn(t, d, sandbox.Spec{})
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	if !b.Reused() {
		t.Fatal("the session was not reused")
	}
	return b
}
