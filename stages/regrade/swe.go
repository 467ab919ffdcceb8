package regrade

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/swe"
)

// SWEOptions configure RunSWE. Out, Tasks and Grade.Driver are required.
type SWEOptions struct {
	Out string
	// Tasks are the run's tasks, by instance id (swe.LoadTasks of its
	// tasks file).
	Tasks map[string]swe.Task
	// Grade is how each patch is graded (driver, run id, test timeout,
	// clone for local and ssh), as the swe run grades it.
	Grade    swe.GradeOptions
	Workers  int // 0 = 4
	Progress io.Writer
	Now      func() time.Time
}

// RunSWE grades the stored patch of every record of a swe output folder
// again (extra.model_patch, through swe.GradePatch in a fresh session of the
// task's image or clone) and appends each verdict to the grades journal:
// reward 1 for resolved, 0 for unresolved or an empty patch, null with the
// reason for an environment failure. Records without a patch (the agent
// never got one, a submission-graded task) keep their grade and are counted
// as Nothing. It blocks until every record is done or ctx is cancelled.
func RunSWE(ctx context.Context, opts SWEOptions) (Summary, error) {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &runner{opts: Options{Out: opts.Out, Workers: opts.Workers, Progress: opts.Progress, Now: opts.Now}}
	return r.gradeAll(ctx, "swe regrade", func(ctx context.Context, jb job) error {
		return r.gradeSWE(ctx, opts, jb)
	})
}

// sweExtra is what a swe record keeps under extra that regrade reads.
type sweExtra struct {
	InstanceID string  `json:"instance_id"`
	Patch      *string `json:"model_patch"`
}

// gradeSWE grades one swe record's patch; the error return is a failure to
// write the journal.
func (r *runner) gradeSWE(ctx context.Context, opts SWEOptions, jb job) error {
	var ex sweExtra
	if raw := schemas.MemberAt(jb.line, schemas.MemberExtra); raw != "" {
		_ = json.Unmarshal([]byte(raw), &ex) // a record without them has no patch
	}
	t, ok := opts.Tasks[ex.InstanceID]
	switch {
	case ex.Patch == nil:
		r.count(func(sm *Summary) { sm.Nothing++ })
		return nil
	case !ok:
		r.note("%s: task %q is not in the tasks file", jb.key, ex.InstanceID)
		r.count(func(sm *Summary) { sm.Nothing++ })
		return nil
	}
	start := opts.Now()
	g := swe.GradePatch(ctx, opts.Grade, t, *ex.Patch)
	if ctx.Err() != nil {
		return nil
	}
	gr := g.Record(opts.Now().Sub(start).Milliseconds())
	line := outdir.GradeLine{Key: jb.key, Record: outdir.RecordSum(jb.line), Reward: gr.Value, Grade: &gr,
		Time: opts.Now().UTC().Format(time.RFC3339)}
	if err := r.journal.Append(line.Encode(), true); err != nil {
		return err
	}
	r.count(func(sm *Summary) {
		sm.Graded++
		switch {
		case gr.Passed == nil:
			sm.GraderError++
		case *gr.Passed:
			sm.Passed++
		default:
			sm.Failed++
		}
	})
	return nil
}
