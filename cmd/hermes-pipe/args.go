package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// reorderArgs moves the flags of the command being run in front of its
// positional arguments, so `cron add "every 5m" --name x` means what it
// says: urfave/cli v2 stops parsing flags at the first positional argument.
// Everything after a "--" is left as it is. Called once by run.
//
// It also accepts Hermes' underscore spellings of the flags we share:
// a flag written --x_y (or --x_y=v) that the command does not declare
// becomes --x-y when that one exists (normaliseFlag). Only flags are
// renamed: never a flag's value, a positional argument, or anything after
// "--".
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	cmds, flags := app.Commands, app.Flags
	i := 1
	for i < len(args) {
		a := args[i]
		if isFlag(a) {
			a = normaliseFlag(flags, a)
			out = append(out, a)
			if takesValue(flags, a) && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			i++
			continue
		}
		c := findCommand(cmds, a)
		if c == nil {
			break
		}
		out = append(out, a)
		i++
		flags = c.Flags
		if len(c.Subcommands) > 0 {
			cmds = c.Subcommands
			continue
		}
		var fl, pos []string
		for i < len(args) {
			a := args[i]
			if a == "--" {
				pos = append(pos, args[i:]...)
				break
			}
			if isFlag(a) {
				a = normaliseFlag(flags, a)
				fl = append(fl, a)
				if takesValue(flags, a) && i+1 < len(args) {
					fl = append(fl, args[i+1])
					i++
				}
			} else {
				pos = append(pos, a)
			}
			i++
		}
		out = append(append(out, fl...), pos...)
		return out
	}
	return append(out, args[i:]...)
}

// normaliseFlag turns "--x_y" or "--x_y=v" into "--x-y" / "--x-y=v" when
// flags has x-y and not x_y; anything else is returned as it is.
func normaliseFlag(flags []cli.Flag, a string) string {
	dashes := len(a) - len(strings.TrimLeft(a, "-"))
	name, value, hasValue := strings.Cut(a[dashes:], "=")
	if !strings.Contains(name, "_") || hasName(flags, name) {
		return a
	}
	dashed := strings.ReplaceAll(name, "_", "-")
	if !hasName(flags, dashed) {
		return a
	}
	out := a[:dashes] + dashed
	if hasValue {
		out += "=" + value
	}
	return out
}

func hasName(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' && a != "--" }

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, alias := range c.Aliases {
			if alias == name {
				return c
			}
		}
	}
	return nil
}

// takesValue reports whether flag a (as written, "-x" or "--name") consumes
// the next argument: known non-boolean flags written without "=".
func takesValue(flags []cli.Flag, a string) bool {
	if strings.Contains(a, "=") {
		return false
	}
	name := strings.TrimLeft(a, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}
