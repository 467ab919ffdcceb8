package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/pipeline/objstore/s3test"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
	"github.com/urfave/cli/v2"
)

// shardGenerateFixed are the generate flags every cluster test run uses.
var shardGenerateFixed = []string{"--model", "m", "--resume", "--workers", "4", "--max-turns", "4",
	"--toolsets", "terminal", "--shard-rows", "5", "--commit-interval", "50ms", "--progress", "none",
	"--max-retries", "3", "--command-timeout", "20s"}

// runShardGenerate runs the real generate command with args; a non-zero exit
// comes back as an exitStatus carrying the code and what it printed.
func runShardGenerate(args []string, stderr io.Writer) error {
	var errb bytes.Buffer
	code := run(append(append([]string{"hermes-pipe", "generate"}, shardGenerateFixed...), args...), io.Discard, &errb)
	_, _ = stderr.Write(errb.Bytes())
	if code != 0 {
		return &exitStatus{code: code, msg: errb.String()}
	}
	return nil
}

func shardGenerate(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var stderr bytes.Buffer
	err := runShardGenerate(args, &stderr)
	return stderr.String(), err
}

// clusterApp runs the CLI with the cluster commands registered.
func clusterCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	app := newApp(&out, &errb)
	for _, c := range []*cli.Command{mergeCommand(), statusCommand()} {
		if app.Command(c.Name) == nil {
			setUsageHandler(c, "")
			app.Commands = append(app.Commands, c)
		}
	}
	err := app.Run(reorderArgs(app, append([]string{"hermes-pipe"}, args...)))
	code := exitCode(err)
	if err != nil {
		fmt.Fprintf(&errb, "hermes-pipe: %v\n", err)
	}
	return code, out.String(), errb.String()
}

func echoPrompts(t *testing.T, n int) string {
	var lines []string
	for i := 0; i < n; i++ {
		lines = append(lines, fmt.Sprintf(`{"prompt": "echo row%d"}`, i%(n/2+1)))
	}
	return writePrompts(t, lines...)
}

// recordsOf reads every record of a sharded run through CatAll, with the
// wall-clock fields (duration_ms, metadata.timestamp) removed, keyed by key.
func recordsOf(t *testing.T, out string) map[string]string {
	t.Helper()
	dirs, err := cluster.ShardDirs(out)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := cluster.CatAll(dirs, &b); err != nil {
		t.Fatal(err)
	}
	recs := map[string]string{}
	for _, line := range bytes.Split(bytes.TrimSpace(b.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "duration_ms")
		delete(m, "timings") // how long each part took differs between runs
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "timestamp")
		}
		key := m["key"].(string)
		if _, dup := recs[key]; dup {
			t.Fatalf("key %s twice", key)
		}
		j, _ := json.Marshal(m)
		recs[key] = string(j)
	}
	return recs
}

// TestShardsOfFakeLLMRunMatchOneShard: with the deterministic fake endpoint,
// the same input as 1 shard and as 7 shards (indices from --shard, from
// JOB_COMPLETION_INDEX and from SLURM_ARRAY_TASK_ID) gives the same keys and
// records; a shard with another N is refused; merge and status agree.
func TestShardsOfFakeLLMRunMatchOneShard(t *testing.T) {
	url := startFake(t, fakellm.Config{}, echoScript)
	prompts := echoPrompts(t, 40)
	base := []string{"--prompts", prompts, "--base-url", url, "--samples", "2"}
	one, seven := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "seven")
	if msg, err := shardGenerate(t, nil, append(base, "--out", one, "--shard", "0/1")...); err != nil {
		t.Fatalf("1 shard: %v\n%s", err, msg)
	}
	for i := 0; i < 7; i++ {
		var env map[string]string
		args := append(base, "--out", seven)
		switch i % 3 {
		case 0:
			args = append(args, "--shard", fmt.Sprintf("%d/7", i))
		case 1:
			env = map[string]string{"JOB_COMPLETION_INDEX": fmt.Sprint(i)}
			args = append(args, "--shard-count", "7")
		case 2:
			env = map[string]string{"SLURM_ARRAY_TASK_ID": fmt.Sprint(i + 1), "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "7"}
		}
		msg, err := shardGenerate(t, env, args...)
		if err != nil {
			t.Fatalf("shard %d: %v\n%s", i, err, msg)
		}
		if want := fmt.Sprintf("shard %d/7 (from ", i); !strings.Contains(msg, want) {
			t.Fatalf("shard %d did not say which it is: %q", i, msg)
		}
		os.Unsetenv("JOB_COMPLETION_INDEX")
		os.Unsetenv("SLURM_ARRAY_TASK_ID")
	}
	a, b := recordsOf(t, one), recordsOf(t, seven)
	if len(a) != 80 || len(b) != 80 {
		t.Fatalf("records: 1 shard %d, 7 shards %d, want 80", len(a), len(b))
	}
	for k, v := range a {
		if b[k] != v {
			t.Fatalf("record %s differs:\n1: %s\n7: %s", k, v, b[k])
		}
	}

	msg, err := shardGenerate(t, nil, append(base, "--out", seven, "--shard", "3/8")...)
	if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "already holds a 7-shard run") {
		t.Fatalf("wrong N: %v (exit %d)\n%s", err, exitCode(err), msg)
	}

	code, stdout, stderr := clusterCLI(t, "merge", seven)
	if code != 0 || !strings.Contains(stdout, "7 shards complete, 80 records") || !strings.Contains(stdout, "all 80 input keys") {
		t.Fatalf("merge: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = clusterCLI(t, "status", seven)
	if code != 0 || !regexpTotal(stdout, 80) {
		t.Fatalf("status: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = clusterCLI(t, "merge", "--json", seven)
	var merged cluster.Merged
	if err := json.Unmarshal([]byte(stdout), &merged); code != 0 || err != nil || merged.ShardCount != 7 || merged.Records != 80 {
		t.Fatalf("merge --json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	code, stdout, stderr = clusterCLI(t, "status", "--json", seven)
	var sts []cluster.ShardStatus
	if err := json.Unmarshal([]byte(stdout), &sts); code != 0 || err != nil || len(sts) != 7 {
		t.Fatalf("status --json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	// cat, stats and verify read across the shards.
	if recs := catRecords(t, seven); len(recs) != 80 {
		t.Errorf("cat across shards: %d records, want 80", len(recs))
	}
	mustVerify(t, seven)
	if code, out, errs := hp(t, "stats", "--json", seven); code != 0 || !strings.Contains(out, `"records": 80`) {
		t.Errorf("stats across shards: exit %d\n%.300s%s", code, out, errs)
	}
	for _, bad := range [][]string{{"merge"}, {"merge", t.TempDir()}, {"status", t.TempDir()}} {
		if code, _, _ := clusterCLI(t, bad...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

func regexpTotal(table string, done int) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && f[0] == "total" {
			return f[1] == fmt.Sprint(done) && f[4] == "0"
		}
	}
	return false
}

// TestClusterChildProcess is the body of a shard process started by
// TestKilledShardsRerunToCompleteMerge; it does nothing (and passes) in a
// normal run.
func TestClusterChildProcess(t *testing.T) {
	args := os.Getenv("HERMES_PIPE_CLUSTER_CHILD")
	if args == "" {
		return
	}
	var list []string
	if err := json.Unmarshal([]byte(args), &list); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	err := runShardGenerate(list, &stderr)
	os.Stderr.Write(stderr.Bytes())
	if err != nil {
		t.Fatal(err)
	}
}

// TestKilledShardsRerunToCompleteMerge: 4 shard processes on one machine, some
// killed with SIGKILL at random moments (several times), merge refuses the
// incomplete run; re-running only the killed indices completes it with
// exactly one record per row, and every shard verifies.
func TestKilledShardsRerunToCompleteMerge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	killAndRerun(t, filepath.Join(t.TempDir(), "out"), "")
}

// TestKilledShardsOnS3RerunToCompleteMerge is the same against a real S3
// server on loopback (scripts/s3.sh, stopped by PID): each start of a shard
// uses a fresh spool, as a pod rescheduled on another machine would, so it
// resumes from what the store holds.
func TestKilledShardsOnS3RerunToCompleteMerge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and an S3 server")
	}
	killAndRerun(t, s3test.URL(s3test.Start(t), "runs/kill"), t.TempDir())
}

// killAndRerun runs the scenario; spools, when set, makes each shard start
// use a new spool folder under it (out is then a URL).
func killAndRerun(t *testing.T, out, spools string) {
	url := startFake(t, fakellm.Config{Latency: 40 * time.Millisecond, Jitter: 40 * time.Millisecond}, echoScript)
	prompts := echoPrompts(t, 100)
	env := killedRunEnv(t)
	starts := 0
	start := func(i int) *exec.Cmd {
		list := []string{"--prompts", prompts, "--base-url", url, "--samples", "2", "--out", out, "--shard", fmt.Sprintf("%d/4", i)}
		if spools != "" {
			starts++
			list = append(list, "--spool", filepath.Join(spools, fmt.Sprintf("spool-%d-%d", i, starts)), "--upload-interval", "150ms")
		}
		args, _ := json.Marshal(list)
		cmd := exec.Command(os.Args[0], "-test.run=^TestClusterChildProcess$", "-test.count=1")
		cmd.Env = append(env, "HERMES_PIPE_CLUSTER_CHILD="+string(args))
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	rng := rand.New(rand.NewPCG(7, 7))
	killed := map[int]bool{1: true, 3: true}
	var cmds []*exec.Cmd
	for i := 0; i < 4; i++ {
		cmds = append(cmds, start(i))
	}
	for round := 0; round < 3; round++ {
		for i := range killed {
			time.Sleep(time.Duration(150+rng.IntN(300)) * time.Millisecond)
			_ = cmds[i].Process.Signal(syscall.SIGKILL) // by PID, only our child
			_ = cmds[i].Wait()
			if round < 2 {
				cmds[i] = start(i)
			}
		}
	}
	for i, cmd := range cmds {
		if killed[i] {
			continue
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("shard %d: %v\n%s", i, err, cmd.Stdout)
		}
	}
	cache := filepath.Join(t.TempDir(), "cache")
	local := out
	if spools != "" {
		local = cache
	}
	// Merge refuses the run and blames only killed shards (how depends on
	// the moment of the kill: rows missing, a torn commit not yet repaired,
	// a shard that never committed).
	code, _, stderr := clusterCLI(t, "merge", out, "--cache", cache)
	if code == 0 || !strings.Contains(stderr, "shard-1-of-4") && !strings.Contains(stderr, "shard-3-of-4") ||
		strings.Contains(stderr, "shard-0-of-4:") || strings.Contains(stderr, "shard-2-of-4:") {
		t.Fatalf("merge of killed shards: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := clusterCLI(t, "status", out, "--cache", cache)
	if code != 0 || !strings.Contains(stdout, "total") || regexpTotal(stdout, 200) {
		t.Fatalf("status of killed shards (some rows must remain): exit %d\n%s%s", code, stdout, stderr)
	}
	var idx []int
	for i := range killed {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx { // re-run only the killed indices
		cmd := start(i)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("re-run shard %d: %v\n%s", i, err, cmd.Stdout)
		}
	}
	code, stdout, stderr = clusterCLI(t, "merge", out, "--cache", cache)
	if code != 0 || !strings.Contains(stdout, "4 shards complete, 200 records (200 ok, 0 failed)") {
		t.Fatalf("merge: exit %d\n%s%s", code, stdout, stderr)
	}
	recs := recordsOf(t, local)
	if len(recs) != 200 {
		t.Fatalf("%d records, want 200", len(recs))
	}
	dirs, _ := cluster.ShardDirs(local)
	for _, d := range dirs {
		mustVerify(t, d)
	}
	wrong := []string{"--prompts", prompts, "--base-url", url, "--out", out, "--shard", "1/5", "--spool", filepath.Join(t.TempDir(), "s")}
	if _, err := shardGenerate(t, nil, wrong...); err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "already holds a 4-shard run") {
		t.Fatalf("wrong N: %v", err)
	}
}

// BenchmarkScaleOut runs 1, 2, 4 and 8 shard processes at once against one
// fake endpoint answering after 200 ms, each shard with the same number of
// rows (48 × 8 workers), and reports the aggregate rows per second:
//
//	go test -run '^$' -bench ScaleOut -benchtime 1x ./cmd/hermes-pipe/
func BenchmarkScaleOut(b *testing.B) {
	url := startFakeB(b, fakellm.Config{Latency: 200 * time.Millisecond}, echoScript)
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			var lines []string
			for len(lines) < 200*n { // enough rows that the hash split is even (the slowest shard sets the wall time)
				lines = append(lines, fmt.Sprintf(`{"prompt": "echo row%d"}`, len(lines)))
			}
			dir := b.TempDir()
			prompts := filepath.Join(dir, "prompts.jsonl")
			if err := os.WriteFile(prompts, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			b.ResetTimer()
			start := time.Now()
			var cmds []*exec.Cmd
			for i := 0; i < n; i++ {
				args, _ := json.Marshal([]string{"--prompts", prompts, "--base-url", url, "--out", out, "--shard", fmt.Sprintf("%d/%d", i, n)})
				cmd := exec.Command(os.Args[0], "-test.run=^TestClusterChildProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), "HERMES_PIPE_CLUSTER_CHILD="+string(args))
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				cmds = append(cmds, cmd)
			}
			for _, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(len(lines))/elapsed.Seconds(), "rows/s")
			b.ReportMetric(float64(len(lines))/elapsed.Seconds()/float64(n), "rows/s/shard")
		})
	}
}

func startFakeB(b *testing.B, cfg fakellm.Config, scriptJSON string) string {
	s, err := fakellm.ParseScripts([]byte(scriptJSON))
	if err != nil {
		b.Fatal(err)
	}
	cfg.Scripts = s
	srv := httptest.NewServer(fakellm.New(cfg))
	b.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// TestS3MergeNamesTheStore: merge of an s3:// run names the URL, not the
// local read cache, in what it prints.
func TestS3MergeNamesTheStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	out := s3test.URL(s3test.Start(t), "runs/named")
	url := startFake(t, fakellm.Config{}, echoScript)
	prompts := echoPrompts(t, 20)
	cache := filepath.Join(t.TempDir(), "cache")
	shard := func(i int) {
		t.Helper()
		args := []string{"--prompts", prompts, "--base-url", url, "--out", out, "--shard", fmt.Sprintf("%d/2", i), "--spool", filepath.Join(t.TempDir(), "spool")}
		if msg, err := shardGenerate(t, nil, args...); err != nil {
			t.Fatalf("shard %d: %v\n%s", i, err, msg)
		}
	}
	shard(0)
	code, stdout, stderr := clusterCLI(t, "merge", out, "--cache", cache)
	if code != exitFatal || !strings.Contains(stderr, "merge "+out+": the shards are not a complete run") ||
		!strings.Contains(stderr, "shard-1-of-2: missing") || strings.Contains(stdout+stderr, cache) {
		t.Fatalf("merge of half a run: exit %d\n%s%s", code, stdout, stderr)
	}
	shard(1)
	code, stdout, stderr = clusterCLI(t, "merge", out, "--cache", cache)
	if code != 0 || !strings.HasPrefix(stdout, out+": 2 shards complete, 20 records") || strings.Contains(stdout, cache) {
		t.Fatalf("merge: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestS3StatusRateFromCommittedSegments: status of an s3:// run takes rate
// and last commit from the commit times its ledger segments record; the read
// cache holds no shard file (rate 0.0, last commit "-") or, after a cat or
// merge, only download times.
func TestS3StatusRateFromCommittedSegments(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	out := s3test.URL(s3test.Start(t), "runs/status")
	url := startFake(t, fakellm.Config{}, echoScript)
	prompts := echoPrompts(t, 20)
	cache := filepath.Join(t.TempDir(), "cache")
	for i := range 2 {
		args := []string{"--prompts", prompts, "--base-url", url, "--out", out, "--shard", fmt.Sprintf("%d/2", i), "--spool", filepath.Join(t.TempDir(), "spool")}
		if msg, err := shardGenerate(t, nil, args...); err != nil {
			t.Fatalf("shard %d: %v\n%s", i, err, msg)
		}
	}
	code, stdout, stderr := clusterCLI(t, "status", out, "--cache", cache, "--json", "--window", "1h")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	var sts []cluster.ShardStatus
	if err := json.Unmarshal([]byte(stdout), &sts); err != nil {
		t.Fatalf("status --json %q: %v", stdout, err)
	}
	total := 0
	for _, s := range sts {
		if s.LastCommit.IsZero() || s.Done == 0 {
			t.Errorf("shard %d: no last commit or nothing done: %+v", s.Index, s)
		}
		// Every record was committed within the hour: rate × window = records.
		if got := int(s.Rate*3600 + 0.5); got != s.Done {
			t.Errorf("shard %d: rate %.4f/s over 1h is %d records, want %d", s.Index, s.Rate, got, s.Done)
		}
		total += s.Done
	}
	if total != 20 {
		t.Errorf("status counts %d records, want 20", total)
	}
	code, stdout, _ = clusterCLI(t, "status", out, "--cache", cache)
	if code != 0 || strings.Contains(stdout, " - ") || !strings.Contains(stdout, "s ago") {
		t.Errorf("status table shows no last commit:\n%s", stdout)
	}
}

// TestS3MergeAndCatWriteNoSDKWarnings: against a server that sends no
// checksum headers (many S3-compatible servers; here the test server behind
// a proxy that strips them), merge and cat of an s3:// run write nothing to
// the process's stderr: the AWS SDK logged a WARN line there per GET.
func TestS3MergeAndCatWriteNoSDKWarnings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	base := s3test.WithoutChecksums(t, s3test.Start(t))
	out := s3test.URL(base, "runs/quiet")
	url := startFake(t, fakellm.Config{}, echoScript)
	prompts := echoPrompts(t, 10)
	for i := range 2 {
		args := []string{"--prompts", prompts, "--base-url", url, "--out", out, "--shard", fmt.Sprintf("%d/2", i), "--spool", filepath.Join(t.TempDir(), "spool")}
		if msg, err := shardGenerate(t, nil, args...); err != nil {
			t.Fatalf("shard %d: %v\n%s", i, err, msg)
		}
	}
	t.Setenv("TMPDIR", t.TempDir())
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = errFile // the SDK's default logger takes os.Stderr when a store is opened
	code, stdout, stderr := clusterCLI(t, "merge", out, "--cache", filepath.Join(t.TempDir(), "m"))
	catCode, catOut, catErr := hp(t, "cat", out) // its read cache is under TMPDIR
	os.Stderr = saved
	errFile.Close()
	if code != 0 || catCode != 0 || strings.Count(catOut, "\n") != 10 {
		t.Fatalf("merge exit %d, cat exit %d (%d lines)\n%s%s%s", code, catCode, strings.Count(catOut, "\n"), stdout, stderr, catErr)
	}
	if b, _ := os.ReadFile(errFile.Name()); len(b) > 0 || stderr != "" || catErr != "" {
		t.Fatalf("merge and cat wrote to stderr:\n%s%s%s", b, stderr, catErr)
	}
}
