package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// A bash shell can also be handed to a new user of its session in place,
// without a new process (Shell.Refresh): on a machine where a process costs
// milliseconds of CPU, restarting the shell for every row of a run is most
// of a pooled session's cost. Refresh is for rows that did not change the
// shell in ways a script cannot undo: the driver asks RefreshSafe of every
// command a row ran, and uses Reset (a new process) for the others.
//
// Refresh runs a fixed script in the shell. It turns POSIX mode on by an
// assignment (special builtins are then found before functions, so no
// function named like one can intercept it), removes every function and
// alias, empties the hash table and the folder stack, waits for the killed
// jobs, goes back to the first folder, removes every variable bash lets go
// and declares the shell's first variables again from what `declare -p`
// printed when it was new, defines the engine's functions again, turns POSIX
// mode off and prints the shell's state. The state must equal the new
// shell's, or Refresh fails and the caller starts a new shell: what the
// script did not undo is never handed on.

// refreshUnsafe matches command text that may change the shell in ways the
// refresh script cannot undo or that could stop it running as written:
// traps (a DEBUG trap runs before each command), disabled or loaded builtins,
// code read from elsewhere (source, ., eval), exec (file descriptors, a new
// program), readonly and other attributes, shell options, limits, umask and
// anything that names POSIX mode, bash's start-up files or BASH_LINENO
// (whose value the comparison ignores, see dynamicVars); `.` only where a
// command starts (`find . -name x` is safe).
var refreshUnsafe = regexp.MustCompile(`(^|[^A-Za-z0-9_.-])(trap|enable|source|eval|exec|readonly|declare|typeset|local|shopt|set|ulimit|umask|builtin|bind|complete|compopt|history|fc|disown|coproc|caller|renice|taskset|ionice|prlimit|chrt|POSIXLY_CORRECT|BASH_ENV|BASH_ARGV0|BASH_COMPAT|BASH_XTRACEFD|SHELLOPTS|BASHOPTS|PROMPT_COMMAND|PS4|BASH_LINENO|extdebug|functrace)($|[^A-Za-z0-9_-])|(^|[;&|(){}!\n` + "`" + `]|\b(then|do|else|elif)\b)\s*\.\s`)

// RefreshSafe reports whether a command leaves its shell in a state that
// Refresh can undo. It errs on the safe side: a false only costs a new
// shell.
func RefreshSafe(command string) bool { return !refreshUnsafe.MatchString(command) }

// refreshKeep are the variables the refresh script leaves alone: bash's
// dynamic ones, which lose their meaning when unset, and the loop's own.
var refreshKeep = []string{
	"BASHPID", "BASH_ALIASES", "BASH_ARGC", "BASH_ARGV", "BASH_ARGV0", "BASH_CMDS", "BASH_COMMAND", "BASH_LINENO",
	"BASH_SOURCE", "BASH_SUBSHELL", "COMP_WORDBREAKS", "DIRSTACK", "EPOCHREALTIME", "EPOCHSECONDS", "FUNCNAME",
	"GROUPS", "HISTCMD", "LINENO", "PIPESTATUS", "POSIXLY_CORRECT", "RANDOM", "SECONDS", "SRANDOM", "_", "__hs_v",
}

// stateReport is what a shell prints of its state, and what Refresh
// compares: variables, functions, aliases, options, traps, mask, folder,
// folder stack, jobs, disabled builtins, hashed commands, $0, $- and the
// positional parameters, and (ipcReport, unless the driver looks itself:
// ShellConfig.HostIPC) the kinds of System V IPC objects its namespace
// holds (a refresh without the supervisor leaves them: the comparison fails
// then). The options are in SHELLOPTS and BASHOPTS,
// read-only variables that `declare -p` prints: a line a shell prints costs
// a write (bash line-buffers its output), so their eighty-odd `set +o` and
// `shopt -p` lines are printed only by a new shell (optionsReport), for the
// options the refresh script restores. Only builtins run, each through
// `builtin` (the refresh script runs it after removing every function).
const stateReport = `\builtin declare -p
\builtin echo '@@functions'; \builtin declare -f
\builtin echo '@@aliases'; \builtin alias -p
\builtin echo '@@options'; \builtin echo "$-|$#|$0"
\builtin echo '@@traps'; \builtin trap -p
\builtin echo '@@rest'; \builtin umask; \builtin pwd; \builtin dirs -l; \builtin jobs -l; \builtin enable -n; \builtin hash -l 2>&1
`

// ipcReport follows stateReport where the driver does not check the
// shell's System V IPC namespace itself (ShellConfig.HostIPC): the kinds of
// objects it holds, read from /proc/sysvipc (some sixty system calls).
const ipcReport = `\builtin echo '@@ipc'; { for __hs_v in shm sem msg; do { \builtin read -r _ && \builtin read -r _ && \builtin echo "$__hs_v"; } </proc/sysvipc/$__hs_v; done; } 2>/dev/null; \unset -v __hs_v
`

// optionsReport follows a new shell's stateReport: every option, as the
// commands that set it.
const optionsReport = `\builtin echo '@@setopts'; \builtin set +o; \builtin shopt -p
`

// reportText is the state report, with optionsReport after it when
// options, followed by an end marker on both streams, the one on stdout
// last and written without a redirection: once it is there, the shell has
// nothing left to undo and reads its next line (the driver looks at its
// descriptors then). With ShellConfig.ReadReport the report goes to a file
// of ReportDir named after the marker (file; nothing may come on stdout
// before the marker then); a row cannot have made that name beforehand.
// The report is sourced from a file, markers included, when the driver can
// write one (ShellConfig.WriteFile): the shell reads a file in blocks, its
// input one byte per system call, so the file is written again for each
// marker (a few system calls on the host against a hundred reads in the
// shell). The new shell's report was sourced from the same file, so bash's
// BASH_SOURCE and FUNCNAME agree; BASH_LINENO, the caller's line in the
// input, is compared by its attributes only.
func (s *Shell) reportText(marker string, options bool) (text, file string) {
	t := stateReport
	if !s.cfg.HostIPC {
		t += ipcReport
	}
	if options {
		t += optionsReport
	}
	if s.cfg.ReadReport != nil {
		file = ".report" + marker
		t = "{\n" + t + "} >" + quotePath(s.cfg.ReportDir+"/"+file) + "\n"
	}
	return s.viaFile("r", t+`\builtin printf '%s\n' `+marker+` >&9; \builtin printf '%s\n' `+marker+"\n", false), file
}

// report is the state report the shell made for reportText: out, what it
// printed before the marker, or the file it wrote.
func (s *Shell) report(out []byte, file string) ([]byte, error) {
	if file == "" {
		return out, nil
	}
	if len(out) > 0 {
		return nil, fmt.Errorf("output beside the state report: %q", bytes.TrimSpace(out))
	}
	return s.cfg.ReadReport(file)
}

// variables splits the `declare -p` part of a state report into its lines
// by variable name.
func variables(report string) (names []string, lines map[string]string) {
	lines = map[string]string{}
	head, _, _ := strings.Cut(report, "@@functions\n")
	for _, l := range strings.Split(head, "\n") {
		f := strings.SplitN(l, " ", 3)
		if len(f) < 3 || f[0] != "declare" {
			continue
		}
		name, _, _ := strings.Cut(f[2], "=")
		names = append(names, name)
		lines[name] = l
	}
	return names, lines
}

// dynamicVars are bash's variables whose value changes by itself (and
// shows in `declare -p` once read): only their attributes are compared.
// BASH_ARGC and BASH_ARGV, the debugger's stacks, keep an entry once a
// file was sourced (the refresh script is).
var dynamicVars = map[string]bool{"BASHPID": true, "BASH_ARGV0": true, "BASH_COMMAND": true, "BASH_SUBSHELL": true,
	"BASH_ARGC": true, "BASH_ARGV": true,
	"EPOCHREALTIME": true, "EPOCHSECONDS": true, "HISTCMD": true, "LINENO": true, "RANDOM": true, "SECONDS": true, "SRANDOM": true,
	"BASH_LINENO": true}

// comparable drops from a state report what differs between two moments of
// one pristine shell: the last argument, the pipeline's statuses and the
// values of dynamic variables.
func comparable(report string) string {
	var b strings.Builder
	head, tail, _ := strings.Cut(report, "@@functions\n")
	for _, l := range strings.Split(head, "\n") {
		if strings.HasPrefix(l, "declare -- _=") || strings.HasPrefix(l, "declare -a PIPESTATUS=") {
			continue
		}
		if f := strings.SplitN(l, " ", 3); len(f) == 3 {
			if name, _, _ := strings.Cut(f[2], "="); dynamicVars[name] {
				l = f[0] + " " + f[1] + " " + name
			}
		}
		b.WriteString(l + "\n")
	}
	b.WriteString(tail)
	return b.String()
}

// options are the `set +o` and `shopt` lines of a new shell's report
// (optionsReport).
func options(report string) []string {
	_, sec, _ := strings.Cut(report, "@@setopts\n")
	var out []string
	for _, l := range strings.Split(sec, "\n") {
		// Setting a compat option sets BASH_COMPAT too; POSIX mode leaves
		// them alone.
		if strings.HasPrefix(l, "set ") || strings.HasPrefix(l, "shopt ") && !strings.Contains(l, " compat") {
			out = append(out, l)
		}
	}
	return out
}

// refreshScript is the script Refresh runs (see above); pristine is the
// shell's state report when it was new.
func (s *Shell) refreshScript(pristine, cwd string) string {
	var b strings.Builder
	// Line by line: each is read, and its aliases expanded, after the one
	// before ran. Errors, and bash's reports of the jobs the supervisor
	// killed (printed after whichever command ends next), go nowhere until
	// the end: the state report after the script is what counts.
	b.WriteString("\\exec 2>/dev/null\n")
	b.WriteString("POSIXLY_CORRECT=y\n")
	b.WriteString("\\unset -f builtin\n")
	b.WriteString("\\builtin unalias -a\n")
	// Without POSIX mode a function could stand in for the builtins below:
	// the shell ends instead (a non-interactive shell exits on ${x:?}).
	b.WriteString("[[ -o posix ]] || __hs_v=${__hs_refresh_needs_posix_mode:?}\n")
	b.WriteString("IFS=$' \\t\\n'\n")
	fns := ShellQuote(s.cfg.StateDir + "/.functions")
	b.WriteString("\\builtin declare -F >" + fns + " && while \\builtin read -r _ _ __hs_v; do \\unset -f -- \"$__hs_v\"; done <" + fns + "\n")
	b.WriteString("\\builtin hash -r; \\builtin dirs -c; \\set --\n\\builtin wait\n\\builtin jobs >/dev/null\n")
	b.WriteString("\\builtin cd -- " + ShellQuote(cwd) + "\n")
	var keep strings.Builder
	for i, k := range refreshKeep {
		if i > 0 {
			keep.WriteString("|")
		}
		keep.WriteString(k)
	}
	b.WriteString("for __hs_v in")
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_" {
		b.WriteString(" ${!" + string(c) + "*}")
	}
	b.WriteString("; do case $__hs_v in " + keep.String() + ") ;; *) \\unset -v -- \"$__hs_v\" ;; esac; done\n")
	names, lines := variables(pristine)
	kept := map[string]bool{}
	for _, k := range refreshKeep {
		kept[k] = true
	}
	for _, n := range names {
		l := lines[n]
		flags := strings.SplitN(l, " ", 3)[1]
		if kept[n] || strings.Contains(flags, "r") {
			continue
		}
		b.WriteString("\\builtin " + l + "\n")
	}
	b.WriteString("\\unset -v __hs_v; RANDOM=$SRANDOM; SECONDS=0\n")
	b.WriteString(shellFuncs + "\n")
	// Leaving POSIX mode does not give back every option entering it
	// changed (expand_aliases, inherit_errexit): the new shell's all are.
	b.WriteString("\\set +o posix\n")
	for _, o := range options(pristine) {
		b.WriteString("\\builtin " + o + "\n")
	}
	b.WriteString("\\exec 2>&9\n")
	return b.String()
}

// posixOptions are the options entering and leaving POSIX mode changes in
// bash 5 (the quick script sets them back as they were in the new shell; a
// bash that changes others fails the quick comparison and gets the whole
// refresh script).
var posixOptions = []string{"expand_aliases", "inherit_errexit"}

// quickScript is the first step of Refresh: like the refresh script it runs
// in POSIX mode (after the caller's prologue) and removes a function named
// builtin and every alias, but it only undoes what ordinary commands change:
// the hash table, finished jobs, the folder (and OLDPWD, as the new shell
// had it), RANDOM's seed and SECONDS. A row that changed more fails the
// comparison that follows and gets the refresh script; one that changed
// nothing costs a few dozen builtins instead of some hundreds.
func quickScript(pristine, cwd string) string {
	var b strings.Builder
	b.WriteString("\\unset -f builtin\n")
	b.WriteString("\\builtin unalias -a\n")
	b.WriteString("[[ -o posix ]] || __hs_v=${__hs_refresh_needs_posix_mode:?}\n")
	b.WriteString("\\builtin hash -r; \\builtin wait; \\builtin jobs >/dev/null\n")
	b.WriteString("\\builtin cd -- " + ShellQuote(cwd) + "\n\\unset -v OLDPWD\n")
	if _, lines := variables(pristine); lines["OLDPWD"] != "" {
		b.WriteString("\\builtin " + lines["OLDPWD"] + "\n")
	}
	b.WriteString("RANDOM=$SRANDOM; SECONDS=0\n")
	b.WriteString("\\set +o posix\n")
	for _, o := range options(pristine) {
		for _, name := range posixOptions {
			if strings.HasSuffix(o, " "+name) {
				b.WriteString("\\builtin " + o + "\n")
			}
		}
	}
	b.WriteString("\\exec 2>&9\n")
	return b.String()
}

// viaFile returns what the shell reads to run script: the script itself,
// or, when the driver can put a file where the shell reads it
// (ShellConfig.WriteFile, called again only when name's script changed), a
// line that sources that file. A shell reads its input from a pipe one byte
// at a time, a system call each (it must leave the rest to the commands),
// and a sourced file in blocks: for the refresh script, some ten thousand
// calls fewer. With posix, POSIX mode goes first, so that `.` is the special
// builtin whatever functions exist (an assignment to a read-only
// POSIXLY_CORRECT ends the shell instead), and the script's errors go
// nowhere (the sourced file's first line, so that the input stays short).
func (s *Shell) viaFile(name, script string, posix bool) string {
	pre := ""
	if posix {
		pre = "POSIXLY_CORRECT=y\n"
		script = "\\exec 2>/dev/null\n" + script
	}
	if s.cfg.WriteFile == nil {
		return pre + script
	}
	f, ok := s.files[name]
	if !ok || f.data != script {
		path, err := s.cfg.WriteFile(name, []byte(script))
		if err != nil {
			return pre + script
		}
		if s.files == nil {
			s.files = map[string]writtenFile{}
		}
		f = writtenFile{path: path, data: script}
		s.files[name] = f
	}
	return pre + "\\. " + quotePath(f.path) + "\n"
}

// ErrNotFresh is returned by Refresh when the shell's state after the
// refresh script differs from its state when it was new (the caller then
// starts a new shell).
var ErrNotFresh = errors.New("the shell's state differs from a new shell's")

// Refresh gives the live, idle shell a fresh start for a new user of the
// session, in the same process (see RefreshSafe). others gets a fresh random
// token: it must have every other process of the session killed and the
// token printed, with a newline, on both streams (a driver's supervisor),
// or report false when the session has no other process (nothing is
// printed then). Then a short script (quickScript) undoes what ordinary
// commands change and the shell's state is compared with its state when it
// was new; where it differs, the refresh script runs and the state is
// compared again. Once it matches, check runs (the driver's look at the
// process from outside: limits, mask, signals, descriptors; with
// ShellConfig.HostIPC, the IPC namespace's objects too) and clean (the
// session's files). ErrNotFresh, or a failing check, leaves the shell
// running and idle, so the caller may Reset it instead; any other error
// kills it.
func (s *Shell) Refresh(ctx context.Context, others func(token string) (bool, error), check, clean func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensureIdle("refresh"); err != nil {
		return err
	}
	if s.pristine == "" {
		return fmt.Errorf("refresh: %w: no state of the new shell", ErrNotFresh)
	}
	l, err := s.handOff(ctx, "refresh", others)
	if err != nil {
		return err
	}
	fresh := false
	for i, step := range []struct{ file, script string }{{"q", s.quick}, {"s", s.script}} {
		s.quickOnly = i == 0
		marker := newMarker()
		report, file := s.reportText(marker, false)
		if err := l.write(ctx, s.viaFile(step.file, step.script, true)+report); err != nil {
			s.drop()
			return fmt.Errorf("refresh: %w", err)
		}
		out, errs, err := l.until(ctx, marker)
		if err != nil {
			s.drop()
			return fmt.Errorf("refresh: %w", err)
		}
		// A report that cannot be read (a row left something else under
		// its name's folder) is not the new shell's either.
		rep, rerr := s.report(out, file)
		if fresh = rerr == nil && len(errs) == 0 && comparable(string(rep)) == s.pristine; fresh {
			break
		}
	}
	if !fresh {
		return fmt.Errorf("refresh: %w", ErrNotFresh)
	}
	if err := check(); err != nil {
		return fmt.Errorf("refresh: %w: %w", ErrNotFresh, err)
	}
	if err := clean(); err != nil {
		s.drop()
		return fmt.Errorf("refresh: %w", err)
	}
	return nil
}

// reportState has the Shell's new shell print its state and folder, kept
// for Refresh: what Refresh compares, and the options for the refresh
// script.
func (s *Shell) reportState(ctx context.Context, l *liveShell) error {
	marker := newMarker()
	text, file := s.reportText(marker, true)
	if err := l.write(ctx, text); err != nil {
		return err
	}
	out, errs, err := l.until(ctx, marker)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("state report: %s", bytes.TrimSpace(errs))
	}
	if out, err = s.report(out, file); err != nil {
		return fmt.Errorf("state report: %w", err)
	}
	state, _, ok := strings.Cut(string(out), "@@setopts\n")
	i := strings.Index(state, "@@rest\n")
	if !ok || i < 0 {
		return errors.New("no state report")
	}
	rest := strings.SplitN(state[i+len("@@rest\n"):], "\n", 3)
	if len(rest) < 2 {
		return errors.New("no folder in the state report")
	}
	s.pristine, s.script, s.quick = comparable(state), s.refreshScript(string(out), rest[1]), quickScript(string(out), rest[1])
	return nil
}
