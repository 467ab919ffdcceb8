// Package regrade grades the records of a generate output folder again
// without the model (`hermes-pipe regrade`): a cmd grader's record gets its
// kept workspace (stages/workspace) restored into a fresh sandbox session and
// the verify command run there; the answer graders compare the record's final
// message with the row's answer; the exec grader reads the record. Each new
// grade is appended to the folder's grades journal (outdir.GradesFile), which
// cat, stats and export read over the records. It never calls a model.
//
// It imports pipeline, pipeline/outdir, sandbox, schemas, stages/grade,
// stages/workspace and stages/generate/prompts; it must not import cmd.
package regrade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/generate/prompts"
	"github.com/hermes-pipe/hermes-pipe/stages/grade"
	"github.com/hermes-pipe/hermes-pipe/stages/workspace"
)

// Options configure Run. Out, Grader and, for a grader that runs commands,
// Driver are required.
type Options struct {
	Out    string
	Grader grade.Grader
	// Verify, when set, is the verify command of every record instead of
	// its row's own (the cmd grader).
	Verify string
	// Prompts is the prompts file the records were made from (their rows'
	// verify, answer and image), read with Samples samples per row and
	// MaxLineBytes; "" = none: only Verify and the exec grader then have
	// something to grade.
	Prompts      string
	Samples      int
	MaxLineBytes int
	// Driver opens the fresh sessions workspaces are restored into; RunID
	// labels them; DefaultImage is the image of a record whose row names
	// none (docker).
	Driver       sandbox.Driver
	RunID        string
	DefaultImage string
	// Workers grade at once; 0 = 4. MaxTar bounds a workspace's tar on
	// restore; 0 = workspace.DefaultMax.
	Workers int
	MaxTar  int64
	// Progress, when set, gets one line per record that could not be
	// graded (no workspace, damaged archive).
	Progress io.Writer
	Now      func() time.Time
}

// Summary counts what Run did with the folder's records.
type Summary struct {
	Records     int // live records read
	Graded      int // new grades journalled
	Passed      int // of Graded, passed
	Failed      int // of Graded, not passed
	GraderError int // of Graded, no verdict (reward null, error set)
	NoWorkspace int // cmd grader without a kept workspace: grade unchanged
	Damaged     int // a kept workspace that could not be restored: grade unchanged
	Nothing     int // nothing to grade (no verify, no answer): grade unchanged
	NotGraded   int // an outcome that is not graded (timeout, failures): unchanged
}

// row is what grading needs of a prompts row.
type row struct{ verify, answer, image string }

// job is one record to grade.
type job struct {
	key     string
	outcome schemas.Outcome
	line    []byte
}

// Run grades every live record of opts.Out again and appends the new grades
// to its grades journal, each line fsynced as it is written. It blocks until
// every record is done or ctx is cancelled (a grading cut short writes no
// line). Records it cannot grade keep their grade and are counted.
func Run(ctx context.Context, opts Options) (Summary, error) {
	var sum Summary
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := opts.Grader.Check(); err != nil {
		return sum, err
	}
	rows, err := readRows(ctx, opts)
	if err != nil {
		return sum, err
	}
	r := &runner{opts: opts, rows: rows}
	return r.gradeAll(ctx, "regrade", r.grade)
}

// gradeAll holds r.opts.Out's run lock (a run and a regrade of one folder
// cannot overlap), opens its grades journal and hands every live record, as
// the shards hold it (not regraded), to one of r.opts.Workers goroutines
// running grade. It stops at the first error grade returns (a journal write) or
// when ctx ends. Run and RunSWE share it; what names the command in errors.
func (r *runner) gradeAll(ctx context.Context, what string, grade func(context.Context, job) error) (Summary, error) {
	out := r.opts.Out
	unlock, err := pipeline.LockFolder(out)
	if err != nil {
		return r.sum, fmt.Errorf("%s: %w (wait for the run to end)", what, err)
	}
	defer unlock()
	j, err := outdir.OpenJournal(filepath.Join(out, outdir.GradesFile), false)
	if err != nil {
		return r.sum, fmt.Errorf("%s %s: %w", what, out, err)
	}
	defer j.Close()
	r.journal = j
	jobs := make(chan job)
	var wg sync.WaitGroup
	var werr atomic.Value
	for range r.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jb := range jobs {
				if err := grade(ctx, jb); err != nil {
					werr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	err = pipeline.EachRecordWith(out, pipeline.CatOptions{Ungraded: true}, func(ref pipeline.RecordRef, line []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e, _ := werr.Load().(error); e != nil {
			return e
		}
		r.count(func(sm *Summary) { sm.Records++ })
		jobs <- job{key: ref.Key, outcome: ref.Outcome, line: append([]byte(nil), line...)}
		return nil
	})
	close(jobs)
	wg.Wait()
	if e, _ := werr.Load().(error); e != nil && err == nil {
		err = e
	}
	if cerr := j.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return r.sum, fmt.Errorf("%s %s: %w", what, out, err)
	}
	return r.sum, nil
}

// runner is the state Run's workers share.
type runner struct {
	opts    Options
	rows    map[string]*row
	journal *outdir.Journal
	mu      sync.Mutex
	sum     Summary
}

// grade grades one record and journals its grade; the error return is a
// failure to write the journal (the run stops).
func (r *runner) grade(ctx context.Context, jb job) error {
	if !grade.Graded(jb.outcome) {
		r.count(func(sm *Summary) { sm.NotGraded++ })
		return nil
	}
	rw := r.rows[jb.key]
	s := grade.Subject{Verify: r.opts.Verify, Final: finalMessage(jb.line), Record: jb.line}
	image := r.opts.DefaultImage
	if rw != nil {
		if s.Verify == "" {
			s.Verify = rw.verify
		}
		s.Answer = rw.answer
		if rw.image != "" {
			image = rw.image
		}
	}
	kind := r.opts.Grader.KindFor(s)
	if kind == "" {
		r.count(func(sm *Summary) { sm.Nothing++ })
		return nil
	}
	var g schemas.Grade
	if kind == grade.Cmd {
		sess, why, err := r.restore(ctx, jb, image)
		if err != nil || why != "" {
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				r.note("%s: %v", jb.key, err)
				r.count(func(sm *Summary) { sm.Damaged++ })
			} else {
				r.note("%s: %s", jb.key, why)
				r.count(func(sm *Summary) { sm.NoWorkspace++ })
			}
			return nil
		}
		s.Session = sess
		g = r.opts.Grader.Grade(ctx, s)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = sess.Close(cctx)
		cancel()
	} else {
		g = r.opts.Grader.Grade(ctx, s)
	}
	if ctx.Err() != nil {
		return nil // cut short: no verdict worth keeping
	}
	line := outdir.GradeLine{Key: jb.key, Record: outdir.RecordSum(jb.line), Reward: g.Value, Grade: &g,
		Time: r.opts.Now().UTC().Format(time.RFC3339)}
	if err := r.journal.Append(line.Encode(), true); err != nil {
		return err
	}
	r.count(func(sm *Summary) {
		sm.Graded++
		switch {
		case g.Passed == nil:
			sm.GraderError++
		case *g.Passed:
			sm.Passed++
		default:
			sm.Failed++
		}
	})
	return nil
}

// restore opens a fresh session holding the record's kept workspace. why is
// set (and no session) when the record has none; err when its archive
// cannot be restored.
func (r *runner) restore(ctx context.Context, jb job, image string) (sandbox.Session, string, error) {
	info, ok, err := workspace.InfoOf(jb.line)
	if err != nil {
		return nil, "", err
	}
	if !ok || !info.Kept() {
		return nil, info.Why(), nil
	}
	if r.opts.Driver == nil {
		return nil, "", errors.New("no sandbox to restore the workspace in")
	}
	clean, err := workspace.Load(r.opts.Out, info, r.opts.MaxTar)
	if err != nil {
		return nil, "", err
	}
	sess, err := r.opts.Driver.Open(ctx, sandbox.Spec{RunID: r.opts.RunID, RolloutID: jb.key, Image: image})
	if err != nil {
		return nil, "", fmt.Errorf("sandbox open: %w", err)
	}
	if err := workspace.Restore(ctx, sess, clean); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = sess.Close(cctx)
		cancel()
		return nil, "", err
	}
	return sess, "", nil
}

func (r *runner) count(f func(*Summary)) {
	r.mu.Lock()
	f(&r.sum)
	r.mu.Unlock()
}

func (r *runner) note(format string, args ...any) {
	if r.opts.Progress == nil {
		return
	}
	r.mu.Lock()
	fmt.Fprintf(r.opts.Progress, "regrade: "+format+"\n", args...)
	r.mu.Unlock()
}

// finalMessage is the value of the record's last gpt turn ("" when none).
func finalMessage(line []byte) string {
	var rec schemas.Record
	if err := schemas.DecodeMembers(line, &rec, schemas.MemberConversations); err != nil {
		return ""
	}
	for i := len(rec.Conversations) - 1; i >= 0; i-- {
		if rec.Conversations[i].From == "gpt" {
			v := rec.Conversations[i].Value
			if j := strings.Index(v, "<tool_call>\n"); j >= 0 {
				v = v[:j] // a turn that called tools: its calls are no answer
			}
			return v
		}
	}
	return ""
}

// readRows reads the prompts file into the rows of every key it yields;
// nil when there is none to read.
func readRows(ctx context.Context, opts Options) (map[string]*row, error) {
	if opts.Prompts == "" {
		return nil, nil
	}
	src, err := prompts.Open(opts.Prompts, prompts.Options{Samples: opts.Samples, MaxLineBytes: opts.MaxLineBytes})
	if err != nil {
		return nil, fmt.Errorf("regrade: prompts: %w", err)
	}
	defer src.Close()
	rows := map[string]*row{}
	var last *schemas.InputRow
	var cur *row
	for {
		rec, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("regrade: prompts: %w", err)
		}
		if rec.Input != last { // the samples of a row share its input
			last = rec.Input
			cur = &row{verify: rec.Input.Verify, answer: rec.Input.Answer, image: rec.Input.Image}
		}
		rows[rec.Key] = cur
	}
}

// Manifest reads what regrade needs from the folder's run.json: the prompts
// file, samples per row and line limit its run was given.
func Manifest(out string) (promptsFile string, samples, maxLine int, err error) {
	man, ok, err := outdir.ReadManifest(out)
	if err != nil {
		return "", 0, 0, err
	}
	if !ok {
		return "", 0, 0, fmt.Errorf("%s: not an output folder (no %s)", out, outdir.ManifestFile)
	}
	var o struct {
		Prompts      string `json:"prompts"`
		Samples      int    `json:"samples"`
		MaxLineBytes int    `json:"max-line-bytes"`
	}
	if len(man.Options) > 0 {
		if err := json.Unmarshal(man.Options, &o); err != nil {
			return "", 0, 0, fmt.Errorf("%s: options: %w", outdir.ManifestFile, err)
		}
	}
	return o.Prompts, o.Samples, o.MaxLineBytes, nil
}
