package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// A usage error is reported in two lines: what is wrong (with the closest
// command or flag when a name is misspelt) and where the help is; never the
// whole help. setUsageHandlers installs, on the app and every command:
//   - OnUsageError: urfave/cli's and Go's flag errors rewritten (unknown
//     flag with a suggestion, a value that does not parse with the syntax
//     it wants);
//   - the required-flag check, done here instead of by urfave/cli, which
//     prints the whole help before its error; an empty value of a required
//     flag (--model "") is refused too;
//   - for the app and each command with subcommands, an Action that refuses
//     an unknown (sub)command with a suggestion.
// The line pointing at the help is printed by run (usageHint).

// setUsageHandlers is called once by newApp.
func setUsageHandlers(app *cli.App) {
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return flagUsageError(app.Flags, err)
	}
	app.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			return unknownCommand("", c.Args().First(), app.Commands)
		}
		return cli.ShowAppHelp(c)
	}
	for _, c := range app.Commands {
		setUsageHandler(c, "")
	}
}

func setUsageHandler(c *cli.Command, parent string) {
	path := strings.TrimSpace(parent + " " + c.Name)
	c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return flagUsageError(c.Flags, err) }
	if required := takeRequired(c.Flags); len(required) > 0 {
		before := c.Before
		c.Before = func(ctx *cli.Context) error {
			if isSubcommand(c, ctx.Args().First()) {
				return nil // `swe regrade`: the subcommand checks its own flags
			}
			// --resume takes the options run.json recorded, required
			// ones included, before they are checked.
			if err := applyRecorded(ctx); err != nil {
				return err
			}
			if err := checkRequired(ctx, required); err != nil {
				return err
			}
			if before != nil {
				return before(ctx)
			}
			return nil
		}
	}
	if len(c.Subcommands) > 0 && c.Action == nil {
		c.Action = func(ctx *cli.Context) error {
			if ctx.NArg() > 0 {
				return unknownCommand(path, ctx.Args().First(), c.Subcommands)
			}
			return cli.ShowSubcommandHelp(ctx)
		}
	}
	for _, sub := range c.Subcommands {
		setUsageHandler(sub, path)
	}
}

// isSubcommand reports whether name is one of c's subcommands (a command
// with an action of its own and subcommands, such as swe).
func isSubcommand(c *cli.Command, name string) bool {
	for _, sub := range c.Subcommands {
		if sub.HasName(name) {
			return true
		}
	}
	return false
}

// takeRequired clears the Required mark of flags (urfave/cli would print
// the whole help when one is missing) and returns their names, checked by
// checkRequired instead.
func takeRequired(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			if f.Required {
				f.Required = false
				names = append(names, f.Name)
			}
		case *cli.StringSliceFlag:
			if f.Required {
				f.Required = false
				names = append(names, f.Name)
			}
		}
	}
	return names
}

// checkRequired refuses required flags left out or given an empty value.
func checkRequired(c *cli.Context, names []string) error {
	var missing []string
	for _, n := range names {
		if !c.IsSet(n) {
			missing = append(missing, "--"+n)
			continue
		}
		if v, ok := c.Value(n).(string); ok && strings.TrimSpace(v) == "" {
			return usagef("--%s is empty; give a value", n)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return usagef("missing required flag %s", missing[0])
	}
	return usagef("missing required flags %s", strings.Join(missing, ", "))
}

// unknownCommand is the usage error of a name that is no command of
// parent ("" for the app), with the closest one.
func unknownCommand(parent, name string, cmds []*cli.Command) error {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Names()...)
		}
	}
	where := "hermes-pipe"
	if parent != "" {
		where += " " + parent
	}
	msg := fmt.Sprintf("%q is not a command of %s", name, where)
	if s := closest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %s?", s)
	}
	return &usageError{msg}
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	badValue      = regexp.MustCompile(`^invalid (?:value|boolean value) "(.*)" for flag -+([^:]+): (.*)$`)
	needsValue    = regexp.MustCompile(`^flag needs an argument: -+(.+)$`)
)

// flagUsageError rewrites a flag-parsing error of a command with flags.
func flagUsageError(flags []cli.Flag, err error) error {
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		out := fmt.Sprintf("unknown flag --%s", m[1])
		var names []string
		for _, f := range flags {
			names = append(names, f.Names()...)
		}
		names = append(names, "help")
		if s := closest(m[1], names); s != "" {
			out += fmt.Sprintf("; did you mean --%s?", s)
		}
		return &usageError{out}
	}
	if m := needsValue.FindStringSubmatch(msg); m != nil {
		return usagef("--%s needs a value", m[1])
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		val, name := m[1], m[2]
		switch flagOf(flags, name).(type) {
		case *cli.DurationFlag:
			return usagef("--%s %s: not a duration; write a unit: 30s, 5m, 1h (or 1h30m)", name, quoteShort(val))
		case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
			return usagef("--%s %s: not a whole number", name, quoteShort(val))
		case *cli.Float64Flag:
			return usagef("--%s %s: not a number", name, quoteShort(val))
		case *cli.BoolFlag:
			return usagef("--%s takes true or false (--%s=false), got %s", name, name, quoteShort(val))
		}
		return usagef("--%s %s: %s", name, quoteShort(val), m[3])
	}
	return &usageError{msg}
}

func flagOf(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// closest is the candidate nearest to name by edit distance, or "" when
// none is near enough to be what was meant: at most a third of the name's
// length away (at least 2), or name is a prefix of it.
func closest(name string, candidates []string) string {
	best, bestD := "", -1
	limit := max(2, len(name)/3)
	for _, c := range candidates {
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if d > limit && !(len(name) >= 3 && strings.HasPrefix(c, name)) {
			continue
		}
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// usageHint is the line after a usage error: the help of the command args
// name (as far as they name one).
func usageHint(app *cli.App, args []string) string {
	path := []string{"hermes-pipe"}
	cmds, flags := app.Commands, app.Flags
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if isFlag(a) {
			if takesValue(flags, a) {
				i++
			}
			continue
		}
		c := findCommand(cmds, a)
		if c == nil {
			break
		}
		path = append(path, c.Name)
		cmds, flags = c.Subcommands, c.Flags
	}
	return fmt.Sprintf("Run '%s --help' for usage.", strings.Join(path, " "))
}
