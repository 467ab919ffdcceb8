package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/objstore"
	"github.com/hermes-pipe/hermes-pipe/pipeline/objstore/s3test"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

type okStage struct{}

func (okStage) Name() string { return "ok" }

func (okStage) Process(_ context.Context, rec *schemas.Record) ([]*schemas.Record, error) {
	rec.Conversations = []schemas.Turn{{From: "human", Value: rec.Key}, {From: "gpt", Value: "fine"}}
	rec.Outcome, rec.Completed = schemas.OutcomeCompleted, true
	return []*schemas.Record{rec}, nil
}

func records(from, to int) []*schemas.Record {
	var recs []*schemas.Record
	for i := from; i < to; i++ {
		recs = append(recs, &schemas.Record{Key: fmt.Sprintf("k%04d", i), PromptIndex: i})
	}
	return recs
}

// run commits recs to the output folder dir (resuming it).
func run(t *testing.T, dir string, recs []*schemas.Record) {
	t.Helper()
	o, err := pipeline.OpenOutput(dir, pipeline.OutputOptions{Mode: pipeline.ModeResume, Kind: "test", MaxShardRows: 4,
		KeepShards: true}) // as cluster.OpenOutput's spool: its shards are uploaded as they commit
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Run(context.Background(), pipeline.Options{Workers: 2}, pipeline.SliceSource(recs), []pipeline.Stage{okStage{}}, o); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
}

func cat(t *testing.T, dir string) string {
	t.Helper()
	var b bytes.Buffer
	if err := pipeline.Cat(dir, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func verify(t *testing.T, dir string) {
	t.Helper()
	rep, err := pipeline.Verify(dir)
	if err != nil || !rep.OK() {
		var b bytes.Buffer
		_ = rep.WriteText(&b)
		t.Fatalf("verify %s: %v\n%s", dir, err, b.String())
	}
}

func TestPushPullRoundTrip(t *testing.T) {
	s3 := s3test.Start(t)
	for name, url := range map[string]string{"s3": s3test.URL(s3, "round/trip"), "file": "file://" + filepath.Join(t.TempDir(), "bucket", "trip")} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := objstore.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			spool := t.TempDir()
			run(t, spool, records(0, 10))
			// What the run spent, calls of uncommitted rows included.
			spend := `{"run":1,"spent":0}` + "\n" + `{"key":"k0011","call":1,"usd":0.75}` + "\n"
			if err := os.WriteFile(filepath.Join(spool, outdir.SpendFile), []byte(spend), 0o644); err != nil {
				t.Fatal(err)
			}
			ps, err := st.Push(ctx, spool)
			if err != nil {
				t.Fatal(err)
			}
			if ps.Files != 3 || ps.Segments != 1 {
				t.Fatalf("first push: %+v", ps)
			}
			if ps, err := st.Push(ctx, spool); err != nil || ps.Files != 0 || ps.Segments != 0 {
				t.Fatalf("idle push: %+v %v", ps, err)
			}
			run(t, spool, records(0, 17)) // resume: 7 more
			if ps, err := st.Push(ctx, spool); err != nil || ps.Files != 2 || ps.Segments != 1 {
				t.Fatalf("second push: %+v %v", ps, err)
			}
			m, err := st.ReadMarker(ctx)
			if err != nil || len(m.Segments) != 2 {
				t.Fatalf("marker %+v %v", m, err)
			}
			parent, err := objstore.Open(ctx, strings.Replace(url, "/trip", "", 1))
			if err != nil {
				t.Fatal(err)
			}
			defer parent.Close()
			if name == "s3" {
				if kids, err := parent.Children(ctx); err != nil || fmt.Sprint(kids) != "[trip]" {
					t.Fatalf("children: %v %v", kids, err)
				}
				if none, err := parent.Sub("nothing").Children(ctx); err != nil || len(none) != 0 {
					t.Fatalf("children of an empty prefix: %v %v", none, err)
				}
			}

			// A reader on another machine, and a resumed run from the store.
			other, err := objstore.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			cache := filepath.Join(t.TempDir(), "cache")
			if err := other.Pull(ctx, cache, objstore.PullOptions{}); err != nil {
				t.Fatal(err)
			}
			verify(t, cache)
			if sp, err := outdir.ReadSpend(cache); err != nil || sp.USD != 0.75 {
				t.Fatalf("the pulled folder's spend journal: %+v %v, want the spool's $0.75", sp, err)
			}
			if got, want := cat(t, cache), cat(t, spool); got != want || strings.Count(got, "\n") != 17 {
				t.Fatalf("pulled folder differs:\n%s\n---\n%s", got, want)
			}
			run(t, cache, records(0, 20))
			if ps, err := other.Push(ctx, cache); err != nil || ps.Segments != 1 {
				t.Fatalf("push of the resumed run: %+v %v", ps, err)
			}
			// The first spool is now behind the store's ledger: refused,
			// and the store keeps the resumed run.
			run(t, spool, records(0, 18))
			if _, err := st.Push(ctx, spool); err == nil || !strings.Contains(err.Error(), "another run") {
				t.Fatalf("diverged spool: %v", err)
			}
			final := t.TempDir()
			if err := st.Pull(ctx, final, objstore.PullOptions{}); err != nil {
				t.Fatal(err)
			}
			verify(t, final)
			if got := strings.Count(cat(t, final), "\n"); got != 20 {
				t.Fatalf("store holds %d records, want 20", got)
			}
			if err := st.Clear(ctx); err != nil {
				t.Fatal(err)
			}
			if m, err := st.ReadMarker(ctx); err != nil || len(m.Segments) != 0 {
				t.Fatalf("after clear: %+v %v", m, err)
			}
			if _, err := st.Push(ctx, spool); err != nil {
				t.Fatalf("push after clear: %v", err)
			}
		})
	}
}

// TestInterruptedPushIsInvisibleAndDamageIsCaught: objects of a push that
// never wrote its marker are ignored by readers; a damaged object is refused.
func TestInterruptedPushIsInvisibleAndDamageIsCaught(t *testing.T) {
	ctx := context.Background()
	bucket := filepath.Join(t.TempDir(), "bucket")
	url := "file://" + bucket
	st, err := objstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	spool := t.TempDir()
	run(t, spool, records(0, 8))
	if _, err := st.Push(ctx, spool); err != nil {
		t.Fatal(err)
	}
	// Half a push: a shard file and a segment without the marker.
	if err := st.WriteFile(ctx, "data/shard-99999.jsonl", []byte("{\"half\n")); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteFile(ctx, "ledger/000002.jsonl", []byte("{\"shard\":\"data/shard-99999.jsonl\"")); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	if err := st.Pull(ctx, cache, objstore.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	verify(t, cache)
	if n := strings.Count(cat(t, cache), "\n"); n != 8 {
		t.Fatalf("pulled %d records, want 8", n)
	}
	// Damage a committed shard object.
	if err := os.WriteFile(filepath.Join(bucket, "data", "shard-00001.jsonl"), []byte("junk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.Pull(ctx, t.TempDir(), objstore.PullOptions{}); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("damaged object: %v", err)
	}
	if err := st.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := st.ReadMarker(ctx); err != nil || len(m.Segments) != 0 {
		t.Fatalf("after clear: %+v %v", m, err)
	}
}

func TestOpenRefusesUnknownSchemes(t *testing.T) {
	for _, u := range []string{"gs://b/x", "ftp://x/y", "azblob://c"} {
		if _, err := objstore.Open(context.Background(), u); err == nil {
			t.Errorf("%s: no error", u)
		}
	}
	if !objstore.IsURL("s3://b/p") || objstore.IsURL("/tmp/out") || objstore.IsURL("out") {
		t.Error("IsURL")
	}
}

// TestCloudSchemesAreWired: gs:// and azblob:// reach their gocloud.dev
// openers (which then need credentials this machine does not have) instead of
// being refused as unknown schemes.
func TestCloudSchemesAreWired(t *testing.T) {
	t.Setenv("AZURE_STORAGE_ACCOUNT", "hermespipetest")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	for _, u := range []string{"gs://bucket/prefix", "azblob://container/prefix"} {
		s, err := objstore.Open(context.Background(), u)
		if err == nil {
			s.Close()
			continue
		}
		if strings.Contains(err.Error(), "not supported") {
			t.Errorf("%s: %v", u, err)
		}
	}
	if _, err := objstore.Open(context.Background(), "ftp://host/x"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("ftp: %v", err)
	}
}

// TestFetchDownloadsOneObject fetches a file:// object to a local file.
func TestFetchDownloadsOneObject(t *testing.T) {
	src := filepath.Join(t.TempDir(), "in", "prompts.jsonl")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("{\"prompt\": \"x\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy.jsonl")
	if err := objstore.Fetch(context.Background(), "file://"+src, dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != "{\"prompt\": \"x\"}\n" {
		t.Fatalf("fetched %q, %v", b, err)
	}
	if err := objstore.Fetch(context.Background(), "file://"+src+".missing", dst+"2"); err == nil {
		t.Fatal("fetching a missing object succeeded")
	}
}

// TestS3ReadsWriteNothingToStderr: the AWS SDK logged "WARN Response has no
// supported checksum" to the process's stderr once per GET from a server
// that sends no checksum (50-60 lines per cat or merge); reads of a store
// must leave stderr to the program.
func TestS3ReadsWriteNothingToStderr(t *testing.T) {
	// Many S3-compatible servers send no checksum headers; strip them, as
	// those servers would, on the way from the test server.
	base := s3test.WithoutChecksums(t, s3test.Start(t))
	ctx := context.Background()
	spool := t.TempDir()
	run(t, spool, records(0, 10))
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = errFile // the SDK's default logger takes os.Stderr when a store is opened
	func() {
		defer func() { os.Stderr = saved }()
		st, err := objstore.Open(ctx, s3test.URL(base, "quiet/run"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Push(ctx, spool); err != nil {
			t.Fatal(err)
		}
		if err := st.Pull(ctx, filepath.Join(t.TempDir(), "cache"), objstore.PullOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := objstore.Fetch(ctx, strings.Replace(s3test.URL(base, "quiet/run"), "/run?", "/run/run.json?", 1), filepath.Join(t.TempDir(), "run.json")); err != nil {
			t.Fatal(err)
		}
	}()
	errFile.Close()
	if b, _ := os.ReadFile(errFile.Name()); len(b) > 0 {
		t.Fatalf("store reads wrote to stderr:\n%s", b)
	}
}

// TestMessagesPutTheObjectInThePath: an object is named by its URL with the
// name in the path, before the query string (not after "&region=…").
func TestMessagesPutTheObjectInThePath(t *testing.T) {
	ctx := context.Background()
	raw := s3test.URL(s3test.Start(t), "named/run")
	st, err := objstore.Open(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.WriteFile(ctx, objstore.MarkerName, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	_, err = st.ReadMarker(ctx)
	want := strings.Replace(raw, "/named/run?", "/named/run/ledger/commit.json?", 1)
	if err == nil || !strings.Contains(err.Error(), "read "+want+":") {
		t.Fatalf("error %v does not name %s", err, want)
	}
	if got := st.Sub("shard-0-of-2").ObjectURL("run.json"); got != strings.Replace(raw, "/named/run?", "/named/run/shard-0-of-2/run.json?", 1) {
		t.Errorf("ObjectURL = %s", got)
	}
}
