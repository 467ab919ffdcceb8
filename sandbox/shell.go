package sandbox

import "strings"

// StateScript returns a POSIX shell script (bash and busybox ash both run it)
// that makes one fresh shell behave like a persistent one. Run it as
// `sh -c SCRIPT sh COMMAND`: it restores the exported environment and working
// folder the previous command saved in stateDir, evaluates COMMAND, and on
// exit (also when COMMAND calls `exit`) saves both again and exits with
// COMMAND's own status. epilogue is shell code run after saving, e.g. to kill
// what the command left running; "" for none.
//
// Drivers (local, docker, ssh) share it so that `cd` and `export` behave the
// same everywhere. A command killed by a timeout saves nothing: the next one
// starts from the state before it. `unset` of a variable inherited from the
// session's base environment does not persist.
func StateScript(stateDir, epilogue string) string {
	var b strings.Builder
	b.WriteString("__hs=")
	b.WriteString(ShellQuote(stateDir))
	b.WriteString(`
if [ -r "$__hs/env" ]; then . "$__hs/env" >/dev/null 2>&1; fi
if [ -r "$__hs/cwd" ]; then IFS= read -r __hs_d <"$__hs/cwd" && cd "$__hs_d" 2>/dev/null; unset __hs_d; fi
__hs_exit() {
__hs_rc=$?
umask 077
[ -d "$__hs" ] || mkdir -p "$__hs" 2>/dev/null
export -p >"$__hs/env" 2>/dev/null
pwd >"$__hs/cwd" 2>/dev/null
`)
	if epilogue != "" {
		b.WriteString(epilogue)
		b.WriteString("\n")
	}
	b.WriteString(`exit $__hs_rc
}
trap __hs_exit EXIT
__hs_c=$1
shift
eval "$__hs_c"
`)
	return b.String()
}

// MarkerVar is set by the local and ssh drivers in every command's
// environment to the name of the session's folder, so processes that left
// the command's process group (setsid, double fork) are still found through
// /proc/<pid>/environ and killed with the session or by gc.
const MarkerVar = "HERMES_SANDBOX"

// ShellQuote quotes s for a POSIX shell as one word.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// quotePath is p as a shell word: as it is when it holds only characters
// no shell treats specially (the engine's short paths, which a shell reads
// a byte per system call), else ShellQuote(p).
func quotePath(p string) string {
	if p == "" {
		return ShellQuote(p)
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-", c)) {
			return ShellQuote(p)
		}
	}
	return p
}
