package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// versionString is what --version, `hermes-pipe version` and run.json's
// tool_version say: the release version set by the linker, else the module
// version Go stamped into the binary, then the VCS revision, its date and
// whether the tree had changes, as far as the build recorded them. "dev"
// alone only when nothing is known.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return formatVersion(version, bi)
}

// formatVersion is versionString for a linker version and build info (nil
// when the binary has none).
func formatVersion(linked string, bi *debug.BuildInfo) string {
	v := linked
	if v == "" {
		v = "dev"
	}
	if bi == nil {
		return v
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	var rev, date string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			date = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var parts []string
	if rev != "" {
		parts = append(parts, "rev "+rev[:min(len(rev), 7)])
	}
	if date != "" {
		d, _, _ := strings.Cut(date, "T")
		parts = append(parts, d)
	}
	if modified {
		parts = append(parts, "modified")
	}
	if len(parts) == 0 {
		return v
	}
	return fmt.Sprintf("%s (%s)", v, strings.Join(parts, ", "))
}

func init() {
	cli.VersionPrinter = func(c *cli.Context) {
		fmt.Fprintf(c.App.Writer, "%s %s\n", c.App.Name, c.App.Version)
	}
}

// versionCommand is `hermes-pipe version`, the same line as --version.
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version and VCS revision of this binary (as --version)",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("version takes no arguments, got %q", c.Args().First())
			}
			cli.ShowVersion(c)
			return nil
		},
	}
}
