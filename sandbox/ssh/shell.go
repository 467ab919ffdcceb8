package ssh

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// The persistent shell mode (the default on a host with bash) keeps one SSH
// channel per session running one bash, and writes every command to it
// (sandbox.Shell). Confined, the bash runs inside bwrap: on the remote host
// the channel runs shellLauncher: a bash (the group leader sshd made) that
// starts bwrap in the background with a relay (cat) between the channel's
// stdin and the shell's, prints its own pid and bwrap's, and waits for
// bwrap. The relay ends when the channel's stdin does (the channel closed,
// the connection dropped, or the launcher exited) and then kills the whole
// group, bwrap included, whose PID namespace dies with it: nothing of the
// session outlives its channel. Inside, bwrap's init is pid 1 and the shell
// pid 2, so a command's processes are every other process of that
// namespace (killCommandScript).

// shellLauncher is the bash script the shell channel runs (see above).
func shellLauncher(box, bash string) string {
	return `exec 3<&0 </dev/null
` + box + " " + sandbox.ShellQuote(bash) + ` --noprofile --norc < <(exec 2>/dev/null; cat <&3 && kill -9 -- -$$) 3<&- &
b=$!
exec 3<&-
echo "$$ $b"
wait "$b"
`
}

// killCommandScript kills every process of the PID namespace of bwrap
// (host pid b) except its init (pid 1 inside) and the shell (pid 2), in
// rounds until none is left (a fork bomb refills between rounds). bwrap's
// children are the namespace's init and the relay, which runs in the host's
// namespace: init is the one whose namespace differs, and nothing is killed
// unless that namespace differs from the script's own. It uses shell
// builtins only, so a loaded host runs it fast: `test -ef` on
// /proc/<pid>/ns/pid compares namespaces, NSpid in /proc/<pid>/status gives
// the pid inside.
func killCommandScript(b int) string {
	return `b=` + strconv.Itoa(b) + `
i=
for d in /proc/[0-9]*; do
  [ "$d/ns/pid" -ef /proc/$$/ns/pid ] && continue
  while read -r k v; do [ "$k" = PPid: ] && { [ "$v" = "$b" ] && i=${d#/proc/}; break; }; done <$d/status 2>/dev/null
  [ -n "$i" ] && break
done
[ -n "$i" ] || exit 0
[ /proc/$i/ns/pid -ef /proc/$$/ns/pid ] && exit 0
n=0
while [ $n -lt 20 ]; do
  k=0
  for d in /proc/[0-9]*; do
    [ "$d/ns/pid" -ef "/proc/$i/ns/pid" ] 2>/dev/null || continue
    p=
    while read -r key v; do [ "$key" = NSpid: ] && { p=$v; break; }; done <$d/status 2>/dev/null
    case ${p##*[	 ]} in 1|2|'') continue ;; esac
    kill -9 "${d#/proc/}" 2>/dev/null && k=$((k+1))
  done
  [ $k = 0 ] && break
  n=$((n+1))
done
exit 0`
}

// Unconfined, the channel runs unconfinedLauncher: a bash that sshd made
// leader of a new session (and process group) starts a relay (cat) from the
// channel's stdin into a pipe, then the shell reading that pipe, prints its
// own pid, the shell's and the relay's, and waits for the shell. Every
// process a command starts stays in that session unless it calls setsid; it
// also carries the session's marker in its environment (the shell itself,
// the launcher and the relay do not: they were started with the login's
// environment, and the shell exports the marker from its restored state).
// The relay kills the session's process group when the channel's stdin
// ends, as confined; a timeout kills the session's processes but the
// launcher, the shell and the relay, and every marked process
// (killUnconfinedScript), as the fresh shells' watcher does on timeout.
// What left both the process group and the marker behind (setsid env -i)
// is out of reach, as with fresh shells: there is no PID namespace.

// unconfinedLauncher is the bash script an unconfined shell channel runs
// (see above); bash is the shell's path. bash sets $! to the process
// substitution's pid.
func unconfinedLauncher(bash string) string {
	return `exec 3<&0 </dev/null
exec 4< <(exec 2>/dev/null; cat <&3 && kill -9 -- -$$)
r=$!
exec 3<&-
` + sandbox.ShellQuote(bash) + ` --noprofile --norc <&4 4<&- &
b=$!
exec 4<&-
echo "$$ $b $r"
wait "$b"
`
}

// killUnconfinedScript kills, in rounds until none is left, every process
// of the session led by the launcher (host pid l) except the launcher, the
// shell (s), the relay (r) and the relay's cat, plus every process carrying
// the session's marker. The loop uses shell builtins only: /proc/<pid>/stat
// gives, after the command name, the state, parent, process group and
// session.
func killUnconfinedScript(l, s, r int, marker string) string {
	return fmt.Sprintf(`l=%d s=%d r=%d
n=0
while [ $n -lt 20 ]; do
  k=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case $p in "$l"|"$s"|"$r") continue ;; esac
    IFS= read -r st 2>/dev/null <"$d/stat" || continue
    set -- ${st##*") "}
    [ "$4" = "$l" ] && [ "$1" != Z ] && [ "$2" != "$r" ] || continue
    kill -9 "$p" 2>/dev/null && k=$((k+1))
  done
  [ $k = 0 ] && break
  n=$((n+1))
done
%s
exit 0`, l, s, r, killMarked(true, marker))
}

// remoteShell is one running shell channel.
type remoteShell struct {
	s      *Session
	conn   *gossh.Client // the connection ch runs on
	ch     *gossh.Session
	done   chan struct{} // closed when ch ended (wait returned)
	leader int           // host pid of the launcher, leader of the channel's process group
	kills  string        // the script killing the running command's processes

	killed     atomic.Bool // Kill was called: the shell's end is ours
	unconfirmd atomic.Bool // Kill had to drop the connection: the remote end is unknown
	killOnce   sync.Once
}

// startShell opens the session's shell channel and waits for the
// launcher's pid line. The session holds the channel's slot (reserveShell).
func (s *Session) startShell(ctx context.Context) (*sandbox.ShellProc, error) {
	conn, ch, err := s.d.shellChannel(ctx, s.lane)
	if err != nil {
		return nil, err
	}
	stdin, err := ch.StdinPipe()
	if err != nil {
		_ = ch.Close()
		return nil, err
	}
	stdout, err := ch.StdoutPipe()
	if err != nil {
		_ = ch.Close()
		return nil, err
	}
	stderr, err := ch.StderrPipe()
	if err != nil {
		_ = ch.Close()
		return nil, err
	}
	if err := ch.Start("exec " + sandbox.ShellQuote(s.bash) + " -c " + sandbox.ShellQuote(s.shellLauncher)); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	br := bufio.NewReader(stdout)
	type line struct {
		text string
		err  error
	}
	got := make(chan line, 1)
	go func() {
		t, err := br.ReadString('\n')
		got <- line{t, err}
	}()
	var l line
	select {
	case l = <-got:
	case <-ctx.Done():
		_ = ch.Close()
		return nil, ctx.Err()
	}
	// Confined: the launcher's pid and bwrap's; unconfined: the
	// launcher's, the shell's and the relay's.
	var pids []int
	for _, f := range strings.Fields(l.text) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			pids = nil
			break
		}
		pids = append(pids, n)
	}
	want := 3
	if s.box != "" {
		want = 2
	}
	if len(pids) != want || !strings.HasSuffix(l.text, "\n") {
		_ = ch.Close()
		return nil, fmt.Errorf("shell launcher on %s printed %q (%v)", s.d.opts.Addr, strings.TrimSpace(l.text), l.err)
	}
	r := &remoteShell{s: s, conn: conn, ch: ch, leader: pids[0], done: make(chan struct{})}
	if s.box != "" {
		r.kills = killCommandScript(pids[1])
	} else {
		r.kills = killUnconfinedScript(pids[0], pids[1], pids[2], s.marker)
	}
	s.lastShell.Store(r)
	return &sandbox.ShellProc{
		Stdin:       stdin,
		Stdout:      br,
		Stderr:      stderr,
		Wait:        r.wait,
		KillCommand: r.killCommand,
		Kill:        r.kill,
	}, nil
}

// wait returns the shell's exit code: bwrap's (128+signal when the shell
// died of one), or 137 when Kill ended it. A channel that ends without an
// exit status (connection lost) is a driver error.
func (r *remoteShell) wait() (int, error) {
	err := r.ch.Wait()
	close(r.done)
	var ee *gossh.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee) && ee.Signal() == "":
		return ee.ExitStatus(), nil
	case errors.As(err, &ee):
		return 128 + signalNumbers[ee.Signal()], nil
	case r.killed.Load():
		return 137, nil
	default:
		return 0, fmt.Errorf("connection lost while the shell ran: %w: %w", sandbox.ErrUnavailable, err)
	}
}

// killCommand kills the command's processes over a short channel of its
// own, bounded by killGrace. Opening a channel on a hung connection blocks
// until the connection is dropped, so the script runs in a goroutine left
// behind when killGrace passes (the Shell then kills the shell, which drops
// such a connection).
func (r *remoteShell) killCommand() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.s.d.killGrace)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		_, err := r.s.d.run(ctx, r.kills, nil)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kill closes the channel, which makes the relay kill the session's process
// group on the remote host. While the channel has not ended, the connection
// is probed every killGrace; one that does not answer within killGrace is
// hung and dropped, so that readers and Wait return (the remote side is
// then unconfirmed).
func (r *remoteShell) kill() {
	r.killOnce.Do(func() {
		r.killed.Store(true)
		_ = r.ch.Close()
		go func() {
			t := time.NewTicker(r.s.d.killGrace)
			defer t.Stop()
			for {
				select {
				case <-r.done:
					return
				case <-t.C:
				}
				// A slow host is waited for; a hung connection is not.
				if !answers(r.conn, r.s.d.killGrace) {
					r.unconfirmd.Store(true)
					r.s.d.forget(r.conn)
					return
				}
			}
		}()
	})
}

// answers reports whether the server replies to a keepalive request on c
// within d.
func answers(c *gossh.Client, d time.Duration) bool {
	replied := make(chan error, 1)
	go func() {
		_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
		replied <- err
	}()
	select {
	case err := <-replied:
		return err == nil
	case <-time.After(d):
		return false
	}
}
