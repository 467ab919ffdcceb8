package main

import (
	"io"
	"strings"
	"testing"
)

func TestReorderArgsPutsFlagsFirst(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	for in, want := range map[string]string{
		`hp cron add every_5m --name x --no-agent --script w.sh`: `hp cron add --name x --no-agent --script w.sh every_5m`,
		`hp cron next 30_2_*_*_* --tz Europe/London --count 3`:   `hp cron next --tz Europe/London --count 3 30_2_*_*_*`,
		`hp verify dir --json`:                                   `hp verify --json dir`,
		`hp cat --final dir`:                                     `hp cat --final dir`,
		`hp sharegpt -- --weird-file`:                            `hp sharegpt -- --weird-file`,
		`hp generate --prompts p --out=o x`:                      `hp generate --prompts p --out=o x`,
		`hp unknown --flag a`:                                    `hp unknown --flag a`,
	} {
		got := strings.Join(reorderArgs(app, strings.Fields(in)), " ")
		if got != want {
			t.Errorf("%s\n got %s\nwant %s", in, got, want)
		}
	}
}
