package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// slurmTools are the programs scripts/slurm-local.sh and the test run.
var slurmTools = []string{"munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "srun", "python3"}

// gatedLLM is the fake endpoint in front of fakellm: while closed, requests
// whose prompt holds "hold" wait (until it opens or the client goes away).
type gatedLLM struct {
	fake     *fakellm.Server
	open     chan struct{}
	once     sync.Once
	held     atomic.Int64 // requests waiting at the gate now
	requests atomic.Int64 // chat requests with messages that reached the model
}

func (g *gatedLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if bytes.Contains(body, []byte("hold")) {
		g.held.Add(1)
		select {
		case <-g.open:
		case <-r.Context().Done():
		}
		g.held.Add(-1)
		if r.Context().Err() != nil {
			return
		}
	}
	var req struct{ Messages []json.RawMessage }
	if strings.HasSuffix(r.URL.Path, "/chat/completions") && json.Unmarshal(body, &req) == nil && len(req.Messages) > 0 {
		g.requests.Add(1) // generate's start-up probe of the path (no message) is no model call
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	g.fake.ServeHTTP(w, r)
}

func (g *gatedLLM) release() { g.once.Do(func() { close(g.open) }) }

// slurmCluster is the one-node cluster of scripts/slurm-local.sh.
type slurmCluster struct {
	t   *testing.T
	env []string // SLURM_CONF and PATH (with the hermes-pipe binary first)
}

// run runs a Slurm client command in dir and returns its trimmed output.
func (c *slurmCluster) run(dir string, extraEnv []string, name string, args ...string) string {
	c.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), c.env...), extraEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

// slurmTask is one array task as scontrol shows it.
type slurmTask struct {
	ID       string // ArrayTaskId ("0", or "0-3" while the rest is pending as one record)
	State    string
	Restarts string
}

// tasks returns the array's tasks by id.
func (c *slurmCluster) tasks(job string) map[string]slurmTask {
	c.t.Helper()
	out := c.run("", nil, "scontrol", "-o", "show", "job", job)
	got := map[string]slurmTask{}
	for _, line := range strings.Split(out, "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		if f["ArrayTaskId"] != "" {
			got[f["ArrayTaskId"]] = slurmTask{ID: f["ArrayTaskId"], State: f["JobState"], Restarts: f["Restarts"]}
		}
	}
	return got
}

// waitTasks polls the array until cond holds (150 s at most); a task that
// ends in any state but COMPLETED fails the test with the submit folder's logs.
func (c *slurmCluster) waitTasks(job, submit, what string, cond func(map[string]slurmTask) bool) map[string]slurmTask {
	c.t.Helper()
	deadline := time.Now().Add(150 * time.Second)
	for {
		ts := c.tasks(job)
		for _, tk := range ts {
			switch tk.State {
			case "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE":
				c.t.Fatalf("job %s task %s ended %s while waiting for %s\n%s", job, tk.ID, tk.State, what, slurmLogs(submit))
			}
		}
		if cond(ts) {
			return ts
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("job %s: %s did not happen; tasks %+v\n%s", job, what, ts, slurmLogs(submit))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// allCompleted is a waitTasks condition: exactly ids, all COMPLETED.
func allCompleted(ids ...string) func(map[string]slurmTask) bool {
	return func(ts map[string]slurmTask) bool {
		if len(ts) != len(ids) {
			return false
		}
		for _, id := range ids {
			if ts[id].State != "COMPLETED" {
				return false
			}
		}
		return true
	}
}

// slurmLogs returns the task logs in the submit folder, for failure messages.
func slurmLogs(dir string) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		fmt.Fprintf(&b, "--- %s\n%s", filepath.Base(l), data)
	}
	return b.String()
}

// taskLog returns the log of one task, where the example's --output puts it.
func taskLog(t *testing.T, submit, job, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(submit, "hermes-pipe-"+job+"_"+id+".log"))
	if err != nil {
		t.Fatalf("task log: %v\n%s", err, slurmLogs(submit))
	}
	return string(b)
}

// ledgerLines counts the committed lines of a shard folder's ledger.
func ledgerLines(dir string) int {
	f, err := os.Open(filepath.Join(dir, "ledger.jsonl"))
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		n++
	}
	return n
}

// TestSlurmArrayExample runs examples/slurm/array.sbatch, unmodified, on a
// one-node Slurm cluster on loopback (scripts/slurm-local.sh), as a user
// would: from a fresh submit folder, with only OUT, PROMPTS, BASE_URL and
// MODEL set, against the fake endpoint. A task requeued while it runs, a
// finished index submitted again and an array numbered from 1 must all end
// in a clean merge with one record per row.
func TestSlurmArrayExample(t *testing.T) {
	for _, tool := range slurmTools {
		if _, err := exec.LookPath(tool); err == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join("/usr/sbin", tool)); err == nil {
			continue
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; CI requires the Slurm test (apt-get install slurm-wlm munge)", tool)
		}
		t.Skipf("%s not installed (apt-get install slurm-wlm munge)", tool)
	}
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..")
	script := filepath.Join(repo, "examples", "slurm", "array.sbatch")

	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "hermes-pipe"), "./cmd/hermes-pipe")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hermes-pipe: %v\n%s", err, out)
	}

	state := t.TempDir()
	start := exec.Command("bash", filepath.Join(repo, "scripts", "slurm-local.sh"), "start", state)
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("start the cluster: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", filepath.Join(repo, "scripts", "slurm-local.sh"), "stop", state).CombinedOutput(); err != nil {
			t.Errorf("stop the cluster: %v\n%s", err, out)
		}
	})
	c := &slurmCluster{t: t, env: []string{
		"SLURM_CONF=" + filepath.Join(state, "slurm.conf"),
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH") + ":/usr/sbin:/sbin",
	}}

	gate := &gatedLLM{fake: fakellm.New(fakellm.Config{}), open: make(chan struct{})}
	srv := httptest.NewServer(gate)
	t.Cleanup(srv.Close)
	t.Cleanup(gate.release)

	const rows = 40
	var lines []string
	for i := 0; i < rows; i++ {
		word := "pass"
		if i%2 == 0 {
			word = "hold"
		}
		lines = append(lines, fmt.Sprintf(`{"prompt": "row %d: %s"}`, i, word))
	}
	prompts := writePrompts(t, lines...)
	exports := func(out string) []string {
		return []string{"OUT=" + out, "PROMPTS=" + prompts, "BASE_URL=" + srv.URL + "/v1", "MODEL=m"}
	}
	// merged checks that merge accepts out and that the run holds one
	// completed record per row.
	merged := func(out string) {
		t.Helper()
		if code, stdout, errs := hp(t, "merge", out); code != 0 {
			t.Fatalf("merge %s: exit %d\n%s%s", out, code, stdout, errs)
		}
		recs := catRecords(t, out)
		keys := map[string]bool{}
		for _, r := range recs {
			key, _ := r["key"].(string)
			if keys[key] {
				t.Fatalf("%s: key %s twice", out, key)
			}
			keys[key] = true
			if r["outcome"] != "completed" {
				b, _ := json.Marshal(r)
				t.Fatalf("%s: record not completed: %s", out, b)
			}
		}
		if len(recs) != rows {
			t.Fatalf("%s: %d records, want %d", out, len(recs), rows)
		}
	}

	// A 0-based array of 4, one task requeued while it waits on the model
	// with some of its rows committed.
	submit := t.TempDir()
	out := filepath.Join(t.TempDir(), "run")
	job := c.run(submit, exports(out), "sbatch", "--parsable", "--array=0-3", script)
	shard1 := filepath.Join(out, "shard-1-of-4")
	c.waitTasks(job, submit, "task 1 running with committed rows and requests held", func(ts map[string]slurmTask) bool {
		return ts["1"].State == "RUNNING" && ledgerLines(shard1) > 0 && gate.held.Load() > 0
	})
	c.run(submit, nil, "scontrol", "requeue", job+"_1")
	c.waitTasks(job, submit, "task 1 requeued", func(ts map[string]slurmTask) bool {
		return ts["1"].Restarts == "1"
	})
	gate.release()
	c.waitTasks(job, submit, "every task completed", allCompleted("0", "1", "2", "3"))
	merged(out)

	// Index 2 submitted again: a new array of one task (its own
	// SLURM_ARRAY_TASK_MIN is 2 and COUNT 1) that resumes shard 2 of the run
	// and finds nothing to do.
	before := gate.requests.Load()
	again := c.run(submit, exports(out), "sbatch", "--parsable", "--array=2", script)
	c.waitTasks(again, submit, "the resubmitted task completed", allCompleted("2"))
	if n := gate.requests.Load() - before; n != 0 {
		t.Fatalf("the finished index submitted again made %d model requests\n%s", n, slurmLogs(submit))
	}
	if log := taskLog(t, submit, again, "2"); !strings.Contains(log, "shard 2/4 (from SLURM_ARRAY_TASK_ID, a later submission") {
		t.Fatalf("the resubmitted task did not resume shard 2/4:\n%s", log)
	}
	merged(out)

	// An array numbered from 1, in a fresh folder, and its index 4 (shard 3)
	// submitted again.
	submit1 := t.TempDir()
	out1 := filepath.Join(t.TempDir(), "run1")
	job1 := c.run(submit1, exports(out1), "sbatch", "--parsable", "--array=1-4", script)
	c.waitTasks(job1, submit1, "every task of the array from 1 completed", allCompleted("1", "2", "3", "4"))
	merged(out1)
	before = gate.requests.Load()
	again1 := c.run(submit1, exports(out1), "sbatch", "--parsable", "--array=4", script)
	c.waitTasks(again1, submit1, "the resubmitted task completed", allCompleted("4"))
	if n := gate.requests.Load() - before; n != 0 {
		t.Fatalf("index 4 of the array from 1 submitted again made %d model requests\n%s", n, slurmLogs(submit1))
	}
	if log := taskLog(t, submit1, again1, "4"); !strings.Contains(log, "shard 3/4 (from SLURM_ARRAY_TASK_ID, a later submission") {
		t.Fatalf("index 4 of the array from 1 did not resume shard 3/4:\n%s", log)
	}
	ents, err := os.ReadDir(out1)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() && !strings.HasSuffix(e.Name(), "-of-4") {
			t.Fatalf("%s: unexpected folder %s", out1, e.Name())
		}
	}
	merged(out1)
}
