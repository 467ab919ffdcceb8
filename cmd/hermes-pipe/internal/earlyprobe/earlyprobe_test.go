package earlyprobe

import "testing"

// TestWanted: the probe starts during initialisation only when generate
// will use the confined local sandbox.
func TestWanted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"generate", "--prompts", "p.jsonl", "--out", "o"}, true},
		{[]string{"generate", "--sandbox", "local", "--out", "o"}, true},
		{[]string{"generate", "--sandbox=local", "--local-isolation", "bwrap"}, true},
		{[]string{"--cpuprofile", "cpu.out", "generate", "--out", "o"}, true},
		{[]string{"--cpuprofile=cpu.out", "generate"}, true},
		{[]string{"--cpuprofile", "generate"}, false}, // "generate" is the profile's file
		{[]string{"generate", "--sandbox", "docker", "--out", "o"}, false},
		{[]string{"generate", "--sandbox=ssh", "--out", "o"}, false},
		{[]string{"generate", "-sandbox", "docker"}, false},
		{[]string{"generate", "--local-isolation", "none"}, false},
		{[]string{"generate", "--local-isolation=none"}, false},
		{[]string{"generate", "--help"}, false},
		{[]string{"generate", "-h"}, false},
		{[]string{"--help", "generate"}, false},
		{[]string{"--version"}, false},
		{[]string{"compress", "--in", "x"}, false},
		{[]string{"swe", "run"}, false},
		{nil, false},
	} {
		if got := Wanted(tc.args); got != tc.want {
			t.Errorf("Wanted(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
