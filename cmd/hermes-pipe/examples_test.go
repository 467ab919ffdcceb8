package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// shellWords splits a command line as sh would for the simple forms the
// examples use: blanks, single and double quotes, backslash-newline. It stops
// at a pipe or a redirection.
func shellWords(line string) ([]string, error) {
	line = strings.ReplaceAll(line, "\\\n", " ")
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\'' || ch == '"':
			end := strings.IndexByte(line[i+1:], ch)
			if end < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case !inWord && (ch == '|' || ch == '>' || ch == '<' || ch == '&' || ch == ';'):
			return words, nil
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// checkExample parses one example against the app's commands: it returns
// the command path it names, and what is wrong with it (a flag its command
// lacks, a value the flag refuses, an unknown command).
func checkExample(app *cli.App, example string) (string, []string) {
	words, err := shellWords(example)
	if err != nil {
		return "", []string{err.Error()}
	}
	if len(words) == 0 || words[0] != "hermes-pipe" {
		return "", []string{fmt.Sprintf("example %q does not start with hermes-pipe", example)}
	}
	var errs []string
	cmds := app.Commands
	var cmd *cli.Command
	var path []string
	var fs *flag.FlagSet
	positional := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "-") && w != "-" {
			if fs == nil {
				return "", append(errs, fmt.Sprintf("example %q: flag %s before any command", example, w))
			}
			name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
			f := fs.Lookup(name)
			if f == nil {
				errs = append(errs, fmt.Sprintf("example %q: %s has no flag --%s", example, strings.Join(path, " "), name))
				continue
			}
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && !hasValue {
				continue
			}
			if !hasValue {
				if i+1 >= len(words) {
					return "", append(errs, fmt.Sprintf("example %q: --%s needs a value", example, name))
				}
				i++
				value = words[i]
			}
			if err := fs.Set(name, value); err != nil {
				errs = append(errs, fmt.Sprintf("example %q: --%s %q: %v", example, name, value, err))
			}
			continue
		}
		if !positional {
			if sub := exampleCommand(cmds, w); sub != nil {
				cmd, cmds, path = sub, sub.Subcommands, append(path, sub.Name)
				fs = flag.NewFlagSet(sub.Name, flag.ContinueOnError)
				fs.SetOutput(io.Discard)
				for _, f := range sub.Flags {
					if err := f.Apply(fs); err != nil {
						errs = append(errs, fmt.Sprintf("%s: flag %v: %v", sub.Name, f.Names(), err))
					}
				}
				continue
			}
		}
		if cmd == nil {
			return "", append(errs, fmt.Sprintf("example %q: no command %q", example, w))
		}
		positional = true
	}
	return strings.Join(path, " "), errs
}

func exampleCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// TestCommandExamples: every command and subcommand has an example in its
// --help, each example names that command, and its flags parse.
func TestCommandExamples(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	seen := map[string]bool{}
	var walk func(prefix []string, cmds []*cli.Command)
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			path := append(append([]string{}, prefix...), c.Name)
			key := strings.Join(path, " ")
			seen[key] = true
			examples := commandExamples[key]
			if len(examples) == 0 {
				t.Errorf("%s: no example (add one to commandExamples, examples.go)", key)
			}
			for _, ex := range examples {
				got, errs := checkExample(app, ex)
				for _, e := range errs {
					t.Error(e)
				}
				if got != key && (len(c.Subcommands) == 0 || !strings.HasPrefix(got, key+" ")) {
					t.Errorf("example %q of %q names the command %q", ex, key, got)
				}
			}
			var out bytes.Buffer
			args := append(append([]string{"hermes-pipe"}, path...), "--help")
			if code := run(args, &out, io.Discard); code != 0 {
				t.Errorf("%s --help: exit %d", key, code)
			}
			for _, ex := range examples {
				if !strings.Contains(out.String(), ex) {
					t.Errorf("%s --help does not show its example %q:\n%s", key, ex, out.String())
				}
			}
			walk(path, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
	for key := range commandExamples {
		if !seen[key] {
			t.Errorf("commandExamples names %q, which is no command", key)
		}
	}
}

// TestCheckExampleFails: the example checker reports a flag its command
// lacks, a value its flag refuses and an unknown command.
func TestCheckExampleFails(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	for _, ex := range []string{
		"hermes-pipe stats --no-such-flag runs/r1",
		"hermes-pipe generate --workers many",
		"hermes-pipe cron next --count 3 --timeout 5m X",
		"hermes-pipe nosuch runs/r1",
	} {
		if _, errs := checkExample(app, ex); len(errs) == 0 {
			t.Errorf("example %q was accepted", ex)
		}
	}
	got, errs := checkExample(app, "hermes-pipe cron --home /tmp/h add 'every 5m' --no-agent --script x.sh | cat")
	if got != "cron add" || len(errs) != 0 {
		t.Errorf("path = %q, errors %q; want cron add, none", got, errs)
	}
}
