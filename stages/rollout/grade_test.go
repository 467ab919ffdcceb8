package rollout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/grade"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

func localDriver(t *testing.T) sandbox.Driver {
	t.Helper()
	d, err := local.New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir(), Isolation: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	// Closed idle sessions are reset in the background for the pool:
	// Release waits for them before the folder is removed.
	t.Cleanup(func() { _ = d.Release() })
	return d
}

func gradedRecord(prompt, verify, answer string) *schemas.Record {
	return &schemas.Record{Key: "g#0", Input: &schemas.InputRow{Prompt: prompt, Verify: verify, Answer: answer}}
}

// checkReward holds rec to a verdict of the given grader.
func checkReward(t *testing.T, rec *schemas.Record, kind string, passed bool, reward float64) {
	t.Helper()
	g := rec.Grade
	if g == nil || rec.Reward == nil || g.Value == nil || g.Passed == nil {
		t.Fatalf("outcome %s: reward %v grade %+v, want a verdict", rec.Outcome, rec.Reward, g)
	}
	if g.Grader != kind || *g.Passed != passed || *rec.Reward != reward || *g.Value != reward || g.Error != "" {
		t.Errorf("grade %s passed %v reward %v error %q, want %s %v %v (output %q)", g.Grader, *g.Passed, *rec.Reward, g.Error, kind, passed, reward, g.Output)
	}
	if rec.Timings == nil {
		t.Errorf("a graded record has no timings")
	}
}

// TestVerifyRunsInTheAgentsSession: the verify command sees the files the
// agent's commands left, in the same session, before it closes.
func TestVerifyRunsInTheAgentsSession(t *testing.T) {
	client := env(t, fakellm.Config{}, 0)
	o := Options{Client: client, Model: "m", Driver: localDriver(t), Toolsets: []string{"terminal"}}
	rec := run(t, o, gradedRecord("[[run=mkdir -p src && echo 7 > src/result.txt]] [[answer=done]]", "grep -qx 7 src/result.txt", ""))
	if rec.Outcome != schemas.OutcomeCompleted {
		t.Fatalf("outcome %s: %s", rec.Outcome, rec.Error)
	}
	checkReward(t, rec, grade.Cmd, true, 1)

	rec = run(t, o, gradedRecord("[[run=echo 8 > result.txt]]", "grep -qx 7 result.txt", ""))
	checkReward(t, rec, grade.Cmd, false, 0)

	// A reward line is the reward.
	rec = run(t, o, gradedRecord("[[run=touch a b c]]", `n=$(ls | wc -l); echo "{\"reward\": $n}"`, ""))
	checkReward(t, rec, grade.Cmd, true, 3)
}

// TestAnswerRowsAreGradedByTheirAnswer: by default a numeric answer is
// compared as a number, another exactly; --grader picks one for every row.
func TestAnswerRowsAreGradedByTheirAnswer(t *testing.T) {
	client := env(t, fakellm.Config{}, 0)
	o := Options{Client: client, Model: "m", Driver: localDriver(t), Toolsets: []string{"terminal"}}
	checkReward(t, run(t, o, gradedRecord("What is 6*7? [[answer=42.0]]", "", "42")), grade.Number, true, 1)
	checkReward(t, run(t, o, gradedRecord("What is 6*7? [[answer=41]]", "", "42")), grade.Number, false, 0)
	checkReward(t, run(t, o, gradedRecord("Capital? [[answer=Paris]]", "", "Paris")), grade.Exact, true, 1)
	o.Grader = grade.Grader{Kind: grade.Contains}
	checkReward(t, run(t, o, gradedRecord("Capital? [[answer=paris, France]]", "", "Paris")), grade.Contains, true, 1)
}

// TestUngradedRecords: a row with nothing to check, and rollouts that did
// not end by the agent or a limit, keep reward null and no grade.
func TestUngradedRecords(t *testing.T) {
	client := env(t, fakellm.Config{}, 0)
	o := Options{Client: client, Model: "m", Driver: localDriver(t), Toolsets: []string{"terminal"}}
	rec := run(t, o, gradedRecord("hello", "", ""))
	if rec.Outcome != schemas.OutcomeCompleted || rec.Reward != nil || rec.Grade != nil {
		t.Errorf("row without verify or answer: outcome %s reward %v grade %+v", rec.Outcome, rec.Reward, rec.Grade)
	}
	// The cmd grader leaves a row with only an answer alone.
	o.Grader = grade.Grader{Kind: grade.Cmd}
	if rec := run(t, o, gradedRecord("[[answer=1]]", "", "1")); rec.Reward != nil || rec.Grade != nil {
		t.Errorf("cmd grader on an answer row: reward %v grade %+v", rec.Reward, rec.Grade)
	}

	o.Grader = grade.Grader{}
	o.Timeout = 300 * time.Millisecond
	rec = run(t, o, gradedRecord("[[run=sleep 30]]", "true", ""))
	if rec.Outcome != schemas.OutcomeTimeout || rec.Reward != nil || rec.Grade != nil {
		t.Errorf("timed-out rollout: outcome %s reward %v grade %+v", rec.Outcome, rec.Reward, rec.Grade)
	}

	bad := env(t, fakellm.Config{Fail500: 1, MaxFaults: 100}, 0)
	o = Options{Client: bad, Model: "m", Driver: localDriver(t), Toolsets: []string{"terminal"}}
	rec = run(t, o, gradedRecord("[[answer=1]]", "true", "1"))
	if rec.Outcome != schemas.OutcomeAPIError || rec.Reward != nil || rec.Grade != nil {
		t.Errorf("api_error rollout: outcome %s reward %v grade %+v", rec.Outcome, rec.Reward, rec.Grade)
	}
}

// TestMaxTurnsIsGraded: a rollout the turn limit ended is judged on what it
// left.
func TestMaxTurnsIsGraded(t *testing.T) {
	client := env(t, fakellm.Config{}, 0)
	o := Options{Client: client, Model: "m", Driver: localDriver(t), Toolsets: []string{"terminal"}, MaxTurns: 1}
	rec := run(t, o, gradedRecord("[[run=touch made]] [[run=true]]", "test -f made", ""))
	if rec.Outcome != schemas.OutcomeMaxTurns {
		t.Fatalf("outcome %s", rec.Outcome)
	}
	checkReward(t, rec, grade.Cmd, true, 1)
}

// TestGraderFailureIsNoReward: a verify command past --grader-timeout gives
// reward null with the error, the rollout's outcome unchanged.
func TestGraderFailureIsNoReward(t *testing.T) {
	client := env(t, fakellm.Config{}, 0)
	o := Options{Client: client, Model: "m", Driver: localDriver(t), Toolsets: []string{"terminal"},
		Grader: grade.Grader{Timeout: 300 * time.Millisecond}}
	rec := run(t, o, gradedRecord("[[answer=x]]", "sleep 30", ""))
	if rec.Outcome != schemas.OutcomeCompleted || rec.Reward != nil || rec.Grade == nil || rec.Grade.Value != nil ||
		!strings.Contains(rec.Grade.Error, "timed out") {
		t.Fatalf("outcome %s reward %v grade %+v", rec.Outcome, rec.Reward, rec.Grade)
	}
}

// TestExecGraderReadsTheRecord: the exec grader gets the record as written,
// its final answer included, and the row's answer in its environment.
func TestExecGraderReadsTheRecord(t *testing.T) {
	judge := filepath.Join(t.TempDir(), "judge")
	body := "#!/bin/sh\nrec=$(cat)\ncase \"$rec\" in *\"Answer: $HERMES_PIPE_ANSWER\"*'\"outcome\":\"completed\"'*) echo '{\"reward\": 0.9}';; *) echo '{\"reward\": 0.1}';; esac\n"
	if err := os.WriteFile(judge, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	client := env(t, fakellm.Config{}, 0)
	o := Options{Client: client, Model: "m", Driver: localDriver(t), Toolsets: []string{"terminal"}, Grader: grade.Grader{Exec: judge}}
	checkReward(t, run(t, o, gradedRecord("[[answer=blue]]", "", "blue")), grade.Exec, true, 0.9)
	checkReward(t, run(t, o, gradedRecord("[[answer=red]]", "", "blue")), grade.Exec, true, 0.1)
	// Every row is graded by an exec grader, with or without verify/answer.
	checkReward(t, run(t, o, gradedRecord("hello", "", "")), grade.Exec, true, 0.1)
}
