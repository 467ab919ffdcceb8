package cron

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Finding is one guard match: the rule that fired and the text it matched.
type Finding struct {
	Rule  string `json:"rule"`
	Match string `json:"match"`
}

func (f Finding) String() string { return fmt.Sprintf("%s (%q)", f.Rule, f.Match) }

type guardRule struct {
	name string
	re   *regexp.Regexp
}

var secretVar = `\$\{?\w*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API)\w*\}?`

// guardSets are the compiled guard rules. They are compiled at the first
// scan (guards), not at start-up: most runs of the binary scan nothing.
type guardSets struct {
	injection, lifecycle, directive []guardRule
	allowed                         []*regexp.Regexp // githubAPICall
}

var guards = sync.OnceValue(func() *guardSets {
	g := &guardSets{injection: injectionRules(), lifecycle: lifecycleRules(), allowed: githubAPICall()}
	g.directive = directiveRules(g.injection)
	return g
})

// injectionRules catch prompts that try to subvert an unattended agent or
// have it damage or leak the machine. They are deliberately conservative:
// each names an action no scheduled job needs.
func injectionRules() []guardRule {
	return []guardRule{
		{"instruction_override", regexp.MustCompile(`(?i)\b(?:ignore|forget|override)\s+(?:\w+\s+){0,3}(?:previous|prior|above|earlier|all|your|system)\s+(?:\w+\s+){0,2}(?:instructions|prompts?|rules|guidelines)`)},
		{"instruction_override", regexp.MustCompile(`(?i)\bdisregard\s+(?:\w+\s+){0,2}(?:instructions|rules|guidelines|prompt)`)},
		{"instruction_override", regexp.MustCompile(`(?i)system\s+prompt\s+override|new\s+system\s+prompt\s*:`)},
		{"deception", regexp.MustCompile(`(?i)\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert|let)\s+the\s+(?:user|owner|operator)`)},
		{"deception", regexp.MustCompile(`(?i)\b(?:hide|conceal)\s+(?:this|it|that|these)\s+(?:\w+\s+){0,2}from\s+the\s+(?:user|owner|operator)`)},
		{"secret_reading", regexp.MustCompile(`(?i)\b(?:cat|less|more|head|tail|base64|xxd|strings|cp|scp)\s+[^\n|;&]*(?:\.env\b|credentials|\.netrc|\.pgpass|\.aws/|\.docker/config\.json|\.kube/config|/etc/shadow)`)},
		{"ssh_keys", regexp.MustCompile(`(?i)authorized_keys|\.ssh/id_[a-z0-9]+|\bid_(?:rsa|ed25519|ecdsa)\b`)},
		{"sudoers", regexp.MustCompile(`(?i)/etc/sudoers|\bvisudo\b|NOPASSWD\s*:`)},
		{"destructive_rm", regexp.MustCompile(`(?i)\brm\s+(?:-[a-z]*\s+)*(?:-[a-z]*[rf][a-z]*\s+)+(?:--no-preserve-root\s+)?(?:/|/\*|~/?|\$HOME/?|\$\{HOME\}/?)(?:\s|$|;|&|\|)`)},
		{"destructive_rm", regexp.MustCompile(`(?i)--no-preserve-root`)},
		{"exfiltration", regexp.MustCompile(`(?i)\b(?:curl|wget|nc|ncat|http)\b[^\n]*` + secretVar)},
		{"exfiltration", regexp.MustCompile(`(?i)` + secretVar + `[^\n]*\|\s*(?:curl|wget|nc|ncat)\b`)},
	}
}

// lifecycleRules catch commands that would stop or restart the scheduler
// that runs the job (a job killing its own daemon loops forever).
func lifecycleRules() []guardRule {
	return []guardRule{
		{"scheduler_lifecycle", regexp.MustCompile(`(?i)\b(?:pkill|killall)\b[^\n]*hermes-pipe`)},
		{"scheduler_lifecycle", regexp.MustCompile(`(?i)\bkill\b[^\n]*(?:pgrep|pidof)[^\n]*hermes-pipe`)},
		{"scheduler_lifecycle", regexp.MustCompile(`(?i)\bkill\b[^\n]*cron/daemon\.pid`)},
		{"scheduler_lifecycle", regexp.MustCompile(`(?i)\bsystemctl\s+(?:--user\s+)?(?:stop|restart|kill|disable|mask|reload-or-restart|try-restart)\s+[^\n]*hermes-pipe`)},
		{"scheduler_lifecycle", regexp.MustCompile(`(?i)\bservice\s+hermes-pipe\S*\s+(?:stop|restart)`)},
		{"scheduler_lifecycle", regexp.MustCompile(`(?i)\blaunchctl\s+(?:unload|stop|kill|bootout|kickstart)\b[^\n]*hermes-pipe`)},
		{"scheduler_lifecycle", regexp.MustCompile(`(?i)\bhermes-pipe\s+(?:--\S+\s+)*cron\s+(?:daemon|tick)\b`)},
	}
}

// directiveRules are the rules whose phrasing does not occur in ordinary
// prose or logs: they are the ones applied to text that enters a prompt at
// run time (context_from outputs, script stdout), which legitimately
// mentions commands.
func directiveRules(injection []guardRule) (out []guardRule) {
	for _, g := range injection {
		if g.name == "instruction_override" || g.name == "deception" {
			out = append(out, g)
		}
	}
	return out
}

// githubAPICall is a curl to api.github.com authenticated with a token
// variable, the form Hermes' GitHub skill uses: it is replaced by a harmless
// stand-in before scanning, so it is allowed while the rest of the line is
// still scanned. The host must be exactly api.github.com (lookalikes such as
// api.github.com.evil.example or api.github.com@evil.example do not match).
func githubAPICall() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`(?i)curl\s+[^\n;&|$` + "`" + `]*(?:-H|--header)\s+["']Authorization:\s*(?:token|Bearer)\s+` + secretVar + `["']\s+["']?https://api\.github\.com(?::\d+)?(?:/[^\s;&|$` + "`" + `'"]*)?(?:["']|\s|$)`),
		regexp.MustCompile(`(?i)curl\s+[^\n;&|$` + "`" + `]*["']?https://api\.github\.com(?::\d+)?(?:/[^\s;&|$` + "`" + `'"]*)?["']?\s+(?:[^\n;&|$` + "`" + `]*\s)?(?:-H|--header)\s+["']Authorization:\s*(?:token|Bearer)\s+` + secretVar + `["']`),
	}
}

func stripAllowed(text string) string {
	for _, re := range guards().allowed {
		text = re.ReplaceAllString(text, "curl https://api.github.com/user ")
	}
	return text
}

// invisible are code points that hide text from a human reader while the
// model still reads it.
func invisible(r rune) bool {
	switch {
	case r >= 0x200B && r <= 0x200F, // zero-width space/joiners, LRM/RLM
		r >= 0x202A && r <= 0x202E, // bidi embedding and override
		r >= 0x2060 && r <= 0x2064, // word joiner, invisible operators
		r >= 0x2066 && r <= 0x2069, // bidi isolates
		r == 0xFEFF, r == 0x00AD, r == 0x180E,
		r >= 0xE0000 && r <= 0xE007F: // tag characters
		return true
	}
	return false
}

// emojiNeighbour reports whether r is a code point an emoji ZWJ sequence
// joins (the ranges Hermes uses: pictographs, symbols, flags, the keycap).
func emojiNeighbour(r rune) bool {
	return (r >= 0x1F000 && r <= 0x1FFFF) || (r >= 0x2600 && r <= 0x27BF) ||
		(r >= 0x2300 && r <= 0x23FF) || r == 0x20E3
}

// firstInvisible returns the first invisible code point of text. A zero
// width joiner between two emoji (skipping the emoji variation selector
// U+FE0F), as in 👨‍👩‍👧 or 🏳️‍🌈, is part of the emoji and allowed.
func firstInvisible(text string) (rune, bool) {
	rs := []rune(text)
	for i, r := range rs {
		if !invisible(r) {
			continue
		}
		if r == 0x200D {
			l, k := i-1, i+1
			for l >= 0 && rs[l] == 0xFE0F {
				l--
			}
			for k < len(rs) && rs[k] == 0xFE0F {
				k++
			}
			if l >= 0 && k < len(rs) && emojiNeighbour(rs[l]) && emojiNeighbour(rs[k]) {
				continue
			}
		}
		return r, true
	}
	return 0, false
}

func scanWith(text string, sets ...[]guardRule) []Finding {
	var out []Finding
	if r, ok := firstInvisible(text); ok {
		out = append(out, Finding{Rule: "invisible_unicode", Match: fmt.Sprintf("U+%04X", r)})
	}
	text = stripAllowed(text)
	for _, set := range sets {
		for _, g := range set {
			if m := g.re.FindString(text); m != "" {
				out = append(out, Finding{Rule: g.name, Match: strings.TrimSpace(m)})
			}
		}
	}
	return out
}

// Scan checks a job's prompt and script text together and returns every
// finding (nil when clean). It is called at add and again before each run;
// it is pure computation over the text.
func Scan(prompt, script string) []Finding {
	g := guards()
	return scanWith(prompt+"\n"+script, g.injection, g.lifecycle)
}

// ScanRuntime checks text that enters an agent's prompt at run time (the
// outputs named by context_from, a script's stdout) with the rules that do
// not fire on ordinary prose or logs: instruction overrides, deception and
// invisible Unicode.
func ScanRuntime(text string) []Finding {
	return scanWith(text, guards().directive)
}

// describeFindings renders findings for an error message.
func describeFindings(fs []Finding) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.String()
	}
	return strings.Join(parts, ", ")
}

// GuardPrompt checks a job prompt as `cron add` does (Scan) and names the
// rules it breaks; the cronjob toolset of rollouts calls it for the prompts
// it is given (rollout.Options.GuardCronPrompt, bound by the command layer).
func GuardPrompt(prompt string) error {
	if fs := Scan(prompt, ""); len(fs) > 0 {
		return fmt.Errorf("the prompt matches %s; a job prompt must not carry injection or exfiltration", describeFindings(fs))
	}
	return nil
}
