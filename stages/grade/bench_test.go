package grade

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
)

// BenchmarkGrade measures what grading adds to a row, against one command in
// the same session (command): the cmd grader should cost that command and no
// more (the target: at most one command's cost per row); the answer
// graders cost string work; the exec grader one host process.
//
//	go test -run '^$' -bench Grade -benchtime 200x ./stages/grade/
func BenchmarkGrade(b *testing.B) {
	ctx := context.Background()
	sess := openLocal(b, true, "") // confined, as --sandbox local runs rows by default
	mustExec(b, sess, "echo 42 > answer.txt")
	verify := "grep -qx 42 answer.txt"
	b.Run("command", func(b *testing.B) {
		for b.Loop() {
			if r, err := sess.Exec(ctx, sandbox.Cmd{Command: verify}); err != nil || r.ExitCode != 0 {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("cmd", func(b *testing.B) {
		g := Grader{Kind: Cmd}
		for b.Loop() {
			if gr := g.Grade(ctx, Subject{Verify: verify, Session: sess}); gr.Passed == nil || !*gr.Passed {
				b.Fatal(gr)
			}
		}
	})
	b.Run("number", func(b *testing.B) {
		g := Grader{}
		final := "<think>6*7</think>So the total is 42 apples.\nAnswer: \\boxed{42}"
		for b.Loop() {
			if gr := g.Grade(ctx, Subject{Answer: "42", Final: final}); gr.Passed == nil || !*gr.Passed {
				b.Fatal(gr)
			}
		}
	})
	b.Run("exec", func(b *testing.B) {
		p := filepath.Join(b.TempDir(), "judge")
		if err := os.WriteFile(p, []byte("#!/bin/sh\ncat >/dev/null\necho '{\"reward\": 1}'\n"), 0o755); err != nil {
			b.Fatal(err)
		}
		g := Grader{Exec: p}
		rec := []byte(`{"key":"r#0","conversations":[{"from":"gpt","value":"Answer: 42"}]}`)
		for b.Loop() {
			if gr := g.Grade(ctx, Subject{Record: rec}); gr.Passed == nil || !*gr.Passed {
				b.Fatal(gr)
			}
		}
	})
}
