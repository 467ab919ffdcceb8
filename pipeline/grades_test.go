package pipeline

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// The grades journal regrade writes changes what cat, EachRecord and stats
// show of the records it names: the latest line of a key wins, a line
// computed from another version of the record is not applied, a torn last
// line is left out, and CatOptions.Ungraded shows the shards' own bytes.
func TestGradesJournalOverlay(t *testing.T) {
	for _, format := range []string{FormatJSONL, FormatParquet} {
		t.Run(format, func(t *testing.T) {
			old := testFormat
			testFormat = format
			defer func() { testFormat = old }()
			dir := filepath.Join(t.TempDir(), "out")
			runAll(t, dir, ModeFresh, 4, completeStage())
			raw := map[string][]byte{}
			err := EachRecordWith(dir, CatOptions{Ungraded: true}, func(ref RecordRef, line []byte) error {
				raw[ref.Key] = append([]byte(nil), line...)
				return nil
			})
			if err != nil || len(raw) != 4 {
				t.Fatal(err, len(raw))
			}
			one, zero := 1.0, 0.0
			yes, no := true, false
			j, err := outdir.OpenJournal(filepath.Join(dir, outdir.GradesFile), false)
			if err != nil {
				t.Fatal(err)
			}
			lines := []outdir.GradeLine{
				{Key: "k00001", Record: outdir.RecordSum(raw["k00001"]), Reward: &zero, Grade: &schemas.Grade{Grader: "cmd", Passed: &no, Value: &zero}},
				{Key: "k00001", Record: outdir.RecordSum(raw["k00001"]), Reward: &one, Grade: &schemas.Grade{Grader: "cmd", Passed: &yes, Value: &one, Output: "ok <&>"}},
				{Key: "k00002", Record: outdir.RecordSum([]byte("another version\n")), Reward: &one, Grade: &schemas.Grade{Grader: "cmd"}},
				{Key: "k00003", Record: outdir.RecordSum(raw["k00003"]), Grade: &schemas.Grade{Grader: "cmd", Error: "timed out"}},
			}
			for _, l := range lines {
				if err := j.Append(l.Encode(), true); err != nil {
					t.Fatal(err)
				}
			}
			j.Close()
			f, _ := os.OpenFile(filepath.Join(dir, outdir.GradesFile), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(`{"key":"k00000","record_sha256":"`) // a regrade killed mid-line
			f.Close()

			recs := catRecords(t, dir)
			if len(recs) != 4 {
				t.Fatalf("%d records", len(recs))
			}
			if recs[0].Reward != nil || recs[0].Grade != nil {
				t.Errorf("k00000 (torn line) shows %v %+v", recs[0].Reward, recs[0].Grade)
			}
			if recs[1].Reward == nil || *recs[1].Reward != 1 || recs[1].Grade == nil || *recs[1].Grade.Passed != true || recs[1].Grade.Output != "ok <&>" {
				t.Errorf("k00001: latest grade not shown: %v %+v", recs[1].Reward, recs[1].Grade)
			}
			if recs[2].Reward != nil || recs[2].Grade != nil {
				t.Errorf("k00002: a grade of another record version was applied")
			}
			if recs[3].Reward != nil || recs[3].Grade == nil || recs[3].Grade.Error != "timed out" {
				t.Errorf("k00003: failed grade not shown as null reward with its error: %v %+v", recs[3].Reward, recs[3].Grade)
			}
			for _, r := range recs {
				if r.Conversations[1].Value != "<think>\n</think>\nanswer <b>&</b>" {
					t.Errorf("%s: other members changed: %q", r.Key, r.Conversations[1].Value)
				}
			}
			err = EachRecordWith(dir, CatOptions{Ungraded: true}, func(ref RecordRef, line []byte) error {
				if string(line) != string(raw[ref.Key]) {
					t.Errorf("%s: Ungraded line differs", ref.Key)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// The viewer's reader gives the same line as EachRecord.
			rr := NewRecordReader(dir)
			defer rr.Close()
			err = EachRecord(dir, func(ref RecordRef, line []byte) error {
				got, err := rr.Read(ref)
				if err != nil || string(got) != string(line) {
					t.Errorf("%s: RecordReader gives %q (%v), EachRecord %q", ref.Key, got, err, line)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Stats(dir); err != nil {
				t.Fatal(err)
			}
			mustVerify(t, dir)
		})
	}
}
