package rollout

import (
	"context"
	"encoding/json"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/grade"
)

// grade runs the run's grader on rec, whose agent turns ended with outcome,
// in sess (still open), and sets rec's Grade, Reward and Timings.GraderMS. A
// row with nothing to grade (no verify, no answer, and no exec grader), or
// an outcome graded says no to, is left ungraded. It blocks for the grader:
// one command in the session (cmd), one host process (exec) or a string
// comparison.
func (s *Stage) grade(ctx context.Context, rec *schemas.Record, sess sandbox.Session, outcome schemas.Outcome,
	errMsg string, messages []schemas.Message, tools []schemas.Tool) {
	if !grade.Graded(outcome) || ctx.Err() != nil {
		return
	}
	subj := grade.Subject{Verify: rec.Input.Verify, Answer: rec.Input.Answer, Final: finalMessage(messages),
		Session: sess, Dir: rec.Input.Cwd}
	kind := s.o.Grader.KindFor(subj)
	if kind == "" {
		return
	}
	if kind == grade.Exec {
		// The exec grader reads the record as it will be written (without
		// its grade).
		snap := *rec
		s.fill(&snap, outcome, errMsg, messages, tools)
		subj.Record, _ = json.Marshal(&snap)
	}
	start := s.o.Now()
	g := s.o.Grader.Grade(ctx, subj)
	rec.Grade, rec.Reward = &g, g.Value
	if rec.Timings == nil {
		rec.Timings = &schemas.Timings{}
	}
	rec.Timings.GraderMS = s.o.Now().Sub(start).Milliseconds()
}

// finalMessage is the content of the last assistant message: the model's
// final answer when it stopped by itself.
func finalMessage(messages []schemas.Message) string {
	for i := len(messages) - 1; i >= 0; i-- {
		if messages[i].Role == "assistant" {
			return messages[i].Content
		}
	}
	return ""
}
