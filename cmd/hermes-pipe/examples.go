package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// commandExamples holds one or more example command lines per command, by
// its path ("cron add"); addExamples appends them to each command's --help.
// TestCommandExamples checks that every command has one and that each
// example's flags are flags of its command, with values they accept.
var commandExamples = map[string][]string{
	"generate": {
		"hermes-pipe generate --prompts prompts.jsonl --out runs/r1 --base-url http://127.0.0.1:8000/v1 --model my-model --workers 8 --max-turns 10",
		"hermes-pipe generate --prompts prompts.jsonl --out runs/r1 --resume --max-cost 20",
		"hermes-pipe generate --prompts tasks.jsonl --out runs/r1 --base-url http://127.0.0.1:8000/v1 --model my-model --samples 4 --keep-workspace",
	},
	"swe regrade": {"hermes-pipe swe regrade runs/swe1 --workers 2"},
	"regrade": {
		"hermes-pipe regrade runs/r1 --verify 'python -m pytest -q tests'",
		"hermes-pipe regrade runs/r1 --grader number",
	},
	"cat":      {"hermes-pipe cat --final runs/r1 | head -1"},
	"stats":    {"hermes-pipe stats --json runs/r1"},
	"verify":   {"hermes-pipe verify runs/r1"},
	"repair":   {"hermes-pipe repair runs/r1"},
	"sharegpt": {"hermes-pipe sharegpt --flatten-content logs.jsonl > sharegpt.jsonl"},
	"export": {
		"hermes-pipe export runs/r1 --to ds --where outcome=completed --dedupe exact --split train=0.95,validation=0.05 --seed 1",
	},
	"compress": {
		"hermes-pipe compress --in runs/r1 --out runs/r1-small --base-url http://127.0.0.1:8000/v1 --model my-model --target-tokens 16000",
		"hermes-pipe compress --in trajectories.jsonl --dry-run --tokenizer cl100k_base",
	},
	"tokens": {"hermes-pipe tokens --tokenizer cl100k_base trajectories.jsonl"},
	"swe": {
		"hermes-pipe swe --tasks tasks.jsonl --out runs/swe1 --base-url http://127.0.0.1:8000/v1 --model my-model --workers 4 --baseline old/report.json --min-resolved 0.4",
	},
	"merge":         {"hermes-pipe merge runs/big --prompts prompts.jsonl"},
	"status":        {"hermes-pipe status runs/big --window 10m"},
	"report":        {"hermes-pipe report -o r1.html runs/r1"},
	"view":          {"hermes-pipe view --addr 127.0.0.1:0 --open runs/r1"},
	"preflight":     {"hermes-pipe preflight --prompts prompts.jsonl --sandbox docker --docker-image python:3.12-slim"},
	"sandbox":       {"hermes-pipe sandbox check"},
	"sandbox check": {"hermes-pipe sandbox check --workers 8"},
	"sandbox gc":    {"hermes-pipe sandbox gc --sandbox docker"},
	"cron":          {"hermes-pipe cron --home ~/.hermes-pipe list"},
	"cron add":      {`hermes-pipe cron add "0 9 * * 1-5" --tz Europe/London --name standup "Summarise yesterday's build logs"`},
	"cron list":     {"hermes-pipe cron list --json"},
	"cron show":     {"hermes-pipe cron show JOB_ID"},
	"cron edit":     {`hermes-pipe cron edit JOB_ID --schedule "every 2h" --max-turns 30`},
	"cron rm":       {"hermes-pipe cron rm JOB_ID"},
	"cron pause":    {"hermes-pipe cron pause JOB_ID"},
	"cron resume":   {"hermes-pipe cron resume JOB_ID"},
	"cron run":      {"hermes-pipe cron run JOB_ID"},
	"cron trigger":  {"hermes-pipe cron trigger JOB_ID"},
	"cron tick":     {"hermes-pipe cron tick --max-parallel 2"},
	"cron daemon":   {"hermes-pipe cron daemon --shutdown-grace 1m"},
	"cron history":  {"hermes-pipe cron history --limit 10 JOB_ID"},
	"cron next":     {`hermes-pipe cron next "30 2 * * *" --tz America/New_York --count 3`},
	"cron import":   {"hermes-pipe cron import --skip-invalid --skills-dir ~/.hermes/skills ~/.hermes/cron/jobs.json"},
	"version":       {"hermes-pipe version"},
}

// addExamples appends each command's examples to its Description, which
// --help prints under DESCRIPTION.
func addExamples(path string, cmds []*cli.Command) {
	for _, c := range cmds {
		p := strings.TrimSpace(path + " " + c.Name)
		if ex := commandExamples[p]; len(ex) > 0 {
			head := "Example:"
			if len(ex) > 1 {
				head = "Examples:"
			}
			text := head + "\n  " + strings.Join(ex, "\n  ")
			if c.Description != "" {
				text = strings.TrimRight(c.Description, "\n") + "\n\n" + text
			}
			c.Description = text
		}
		addExamples(p, c.Subcommands)
	}
}
