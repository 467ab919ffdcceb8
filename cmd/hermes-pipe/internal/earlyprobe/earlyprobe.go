// Package earlyprobe starts the local sandbox's confinement probe while the
// program is still initialising its packages, when its arguments say the
// command will wait for that probe. main imports it for that alone.
//
// A generate run on the confined local sandbox waits for the probe
// (bubblewrap run once, ~10 ms of wall time here) before its first model
// call. Started by main, the probe began ~13 ms after exec: once the
// binary's ~400 packages had run their inits (7-11 ms on this machine) and
// the app had parsed its own flags. Go initialises packages in import-path
// order as soon as their imports are (the language spec's rule), so this
// one, which imports only sandbox/local of ours, runs among the first and
// the probe overlaps the other inits: a 200-row generate run's first model
// call went out 27.0 ms after exec instead of 32.1 (mean of five runs each).
package earlyprobe

import (
	"os"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
)

func init() {
	if Wanted(os.Args[1:]) {
		local.StartProbe()
	}
}

// Wanted says, from a glance at the program's arguments, whether the
// command will probably open the confined local sandbox and wait for its
// probe before its first row: generate with no --sandbox other than local
// and no --local-isolation none. The app's own flags before the command
// (--cpuprofile FILE) are skipped. A wrong guess costs a probe nobody
// takes, or nothing: the sandbox starts its own probe when none was.
func Wanted(args []string) bool {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		name, _, inline := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if name != "cpuprofile" {
			return false // --help, --version, or a flag the app does not have
		}
		args = args[1:]
		if !inline && len(args) > 0 {
			args = args[1:]
		}
	}
	if len(args) == 0 || args[0] != "generate" {
		return false
	}
	for i := 1; i < len(args); i++ {
		name, value, inline := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if args[i] == "--" || !strings.HasPrefix(args[i], "-") {
			continue
		}
		if !inline && i+1 < len(args) {
			value = args[i+1]
		}
		switch name {
		case "h", "help":
			return false
		case "sandbox":
			if value != "local" {
				return false
			}
		case "local-isolation":
			if value == "none" {
				return false
			}
		}
	}
	return true
}
