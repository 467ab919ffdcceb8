package main

import "testing"

// TestProbesEarly: the app starts the local sandbox's probe before parsing
// generate's flags only when generate will use the confined local sandbox.
func TestProbesEarly(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"generate", "--prompts", "p.jsonl", "--out", "o"}, true},
		{[]string{"generate", "--sandbox", "local", "--out", "o"}, true},
		{[]string{"generate", "--sandbox=local", "--local-isolation", "bwrap"}, true},
		{[]string{"generate", "--sandbox", "docker", "--out", "o"}, false},
		{[]string{"generate", "--sandbox=ssh", "--out", "o"}, false},
		{[]string{"generate", "-sandbox", "docker"}, false},
		{[]string{"generate", "--local-isolation", "none"}, false},
		{[]string{"generate", "--local-isolation=none"}, false},
		{[]string{"generate", "--help"}, false},
		{[]string{"generate", "-h"}, false},
		{[]string{"compress", "--in", "x"}, false},
		{[]string{"swe", "run"}, false},
		{nil, false},
	} {
		if got := probesEarly(tc.args); got != tc.want {
			t.Errorf("probesEarly(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
