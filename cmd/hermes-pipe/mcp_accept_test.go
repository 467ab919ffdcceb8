package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

// The acceptance of the MCP client, against the reference servers users
// run, installed by `npm ci --prefix scripts` (see .ci/run).

// markEnv names the variable every server of a test gets (through its
// config's env, the only way a variable reaches a server), so the test can
// find each server process, and whatever it started, in /proc.
const markEnv = "HERMES_PIPE_MCP_MARK"

// newMark returns a value for markEnv unique to this test.
func newMark(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano())
}

// npmDir returns scripts/ (its node_modules holds the npm servers).
func npmDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	d, err := filepath.Abs(filepath.Join("..", "..", "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"server-filesystem", "server-memory", "server-everything"} {
		if _, err := os.Stat(npmEntry(d, p)); err != nil {
			t.Fatalf("@modelcontextprotocol/%s is not installed: run npm ci --prefix scripts (%v)", p, err)
		}
	}
	return d
}

func npmEntry(scripts, pkg string) string {
	return filepath.Join(scripts, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
}

// markedProcesses returns the live processes whose environment holds
// markEnv=mark, with their command lines.
func markedProcesses(mark string) map[int]string {
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv == markEnv+"="+mark && !processGone(pid) {
				cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				out[pid] = strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))
			}
		}
	}
	return out
}

// processEnv returns one variable of a process's environment.
func processEnv(pid int, name string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// startEverythingHTTP starts server-everything in its Streamable HTTP mode
// (the package's first argument picks the transport, PORT the port; it has
// no option for the address and listens on all of them, so it is reached
// on 127.0.0.1) and returns its MCP endpoint once it listens.
func startEverythingHTTP(t *testing.T, scripts string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("node", npmEntry(scripts, "server-everything"), "streamableHttp")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PORT=" + strconv.Itoa(port)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	// It says so on stderr once it listens; the rest of stderr is drained.
	listening := make(chan bool, 1)
	var tail syncBuffer
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			tail.Write(append(sc.Bytes(), '\n'))
			if !said && strings.Contains(sc.Text(), "listening on port") {
				said = true
				listening <- true
			}
		}
		if !said {
			listening <- false
		}
	}()
	select {
	case ok := <-listening:
		if !ok {
			t.Fatalf("server-everything exited: %s", tail.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("server-everything did not listen: %s", tail.String())
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// killWhenReading waits (polling /proc) for the memory server of mark
// whose MEMORY_FILE_PATH has become a named pipe, opens the pipe for
// writing, which blocks until the server opens it to read, that is until
// a call to it is in flight, then removes the pipe (so the restarted server
// starts empty) and kills the server with SIGKILL. It sends the killed PID.
func killWhenReading(t *testing.T, mark string, stop <-chan struct{}) <-chan int {
	killed := make(chan int, 1)
	go func() {
		defer close(killed)
		for {
			for pid, cl := range markedProcesses(mark) {
				if !strings.Contains(cl, "server-memory") {
					continue
				}
				p := processEnv(pid, "MEMORY_FILE_PATH")
				if st, err := os.Stat(p); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
					continue
				}
				// O_NONBLOCK: ENXIO until a reader has it open.
				fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
				if errors.Is(err, syscall.ENXIO) {
					continue
				} else if err != nil {
					t.Errorf("open %s: %v", p, err)
					return
				}
				_ = os.Remove(p)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				_ = syscall.Close(fd)
				killed <- pid
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return killed
}

// acceptScript is the model's side of TestGenerateWithRealMCPServers.
const acceptScript = `{"scripts": [{"match": "^use the servers$", "steps": [
  {"tool_calls": [
    {"name": "terminal", "arguments": {"command": "printf 'written by terminal\\n' > note.txt"}},
    {"name": "mcp_fs_read_text_file", "arguments": {"path": "note.txt"}},
    {"name": "mcp_mem_create_entities", "arguments": {"entities": [{"name": "Ada", "entityType": "person", "observations": ["writes code"]}]}},
    {"name": "mcp_mem_open_nodes", "arguments": {"names": ["Ada"]}},
    {"name": "mcp_every_echo", "arguments": {"message": "over http"}},
    {"name": "mcp_everystdio_echo", "arguments": {"message": "over stdio"}},
    {"name": "mcp_every_get-sum", "arguments": {"a": 2, "b": 3}}]},
  {"tool_calls": [
    {"name": "terminal", "arguments": {"command": "rm memory.jsonl && mkfifo -m 666 memory.jsonl"}},
    {"name": "mcp_mem_read_graph", "arguments": {}}]},
  {"tool_calls": [
    {"name": "mcp_mem_create_entities", "arguments": {"entities": [{"name": "Bob", "entityType": "person", "observations": ["came after the crash"]}]}},
    {"name": "mcp_mem_open_nodes", "arguments": {"names": ["Bob", "Ada"]}},
    {"name": "mcp_fs_list_directory", "arguments": {"path": "."}}]},
  {"content": "All done."}]}]}`

// TestGenerateWithRealMCPServers is the acceptance run: one generate run
// with a filesystem server (one per rollout, rooted at ${workdir}), a
// memory server, server-everything over Streamable HTTP and over stdio.
// The filesystem server reads the file the terminal tool wrote; memory
// stores and reads back an entity; each result is the tool turn exactly;
// tool_stats count the calls under their mcp_ names; the memory server,
// killed in the middle of a call, gives a tool error counted as a failure,
// and the next call to it works on a restarted server; no server is left
// when the run ends.
func TestGenerateWithRealMCPServers(t *testing.T) {
	scripts := npmDir(t)
	endpoint := startEverythingHTTP(t, scripts)
	mark := newMark(t)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	env := func(extra string) string { return `"env": {"` + markEnv + `": ` + q(mark) + extra + `}` }
	cfgText := `{"mcpServers": {
  "fs": {"command": "node", "args": [` + q(npmEntry(scripts, "server-filesystem")) + `, "${workdir}"], "scope": "rollout", ` + env("") + `},
  "mem": {"command": "node", "args": [` + q(npmEntry(scripts, "server-memory")) + `], ` + env(`, "MEMORY_FILE_PATH": "${workdir}/memory.jsonl"`) + `},
  "every": {"url": "` + endpoint + `", "tools": {"include": ["echo", "get-sum"]}},
  "everystdio": {"command": "node", "args": [` + q(npmEntry(scripts, "server-everything")) + `, "stdio"], "tools": {"include": ["echo"]}, ` + env("") + `}
}}`
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startFake(t, fakellm.Config{}, acceptScript)
	prompts := writePrompts(t, `{"prompt": "use the servers"}`)
	out := filepath.Join(t.TempDir(), "out")
	stop := make(chan struct{})
	killed := killWhenReading(t, mark, stop)
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", url, "--model", "m", "--progress", "none",
		"--sandbox", "local", "--mcp-config", cfg, "--toolsets", "terminal,mcp-fs,mcp-mem,mcp-every,mcp-everystdio")
	close(stop)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, ok := <-killed; !ok {
		t.Fatal("the memory server never read its named pipe: the crash was not exercised")
	}
	recs := catRecords(t, out)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	r := recs[0]
	if r["outcome"] != "completed" {
		t.Fatalf("outcome %v: %v", r["outcome"], r["error"])
	}
	// Each call's tool message, exactly as the server's result maps to it,
	// in call order (one tool turn per model step, its responses in order).
	got := toolMessages(t, r)
	ent := func(name, obs string) string {
		return `{\n    \"name\": \"` + name + `\",\n    \"entityType\": \"person\",\n    \"observations\": [\n      \"` + obs + `\"\n    ]\n  }`
	}
	sc := func(name, obs string) string {
		return `{"entityType": "person", "name": "` + name + `", "observations": ["` + obs + `"]}`
	}
	nodes := func(name, obs string) string {
		return `{"result": "{\n  \"entities\": [\n    ` + strings.ReplaceAll(ent(name, obs), `\n`, `\n  `) + `\n  ],\n  \"relations\": []\n}", "structuredContent": {"entities": [` + sc(name, obs) + `], "relations": []}}`
	}
	want := [][2]string{
		{"terminal", `{"output": "", "exit_code": 0, "error": null}`},
		{"mcp_fs_read_text_file", `{"result": "written by terminal\n", "structuredContent": {"content": "written by terminal\n"}}`},
		{"mcp_mem_create_entities", `{"result": "[\n  ` + ent("Ada", "writes code") + `\n]", "structuredContent": {"entities": [` + sc("Ada", "writes code") + `]}}`},
		{"mcp_mem_open_nodes", nodes("Ada", "writes code")},
		{"mcp_every_echo", `{"result": "Echo: over http"}`},
		{"mcp_everystdio_echo", `{"result": "Echo: over stdio"}`},
		{"mcp_every_get-sum", `{"result": "The sum of 2 and 3 is 5."}`},
		{"terminal", `{"output": "", "exit_code": 0, "error": null}`},
		{"mcp_mem_read_graph", ""}, // checked below
		{"mcp_mem_create_entities", `{"result": "[\n  ` + ent("Bob", "came after the crash") + `\n]", "structuredContent": {"entities": [` + sc("Bob", "came after the crash") + `]}}`},
		{"mcp_mem_open_nodes", nodes("Bob", "came after the crash")},
		{"mcp_fs_list_directory", `{"result": "[FILE] memory.jsonl\n[FILE] note.txt", "structuredContent": {"content": "[FILE] memory.jsonl\n[FILE] note.txt"}}`},
	}
	if len(got) != len(want) {
		t.Fatalf("%d tool messages, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i][0] != w[0] || (w[1] != "" && got[i][1] != w[1]) {
			t.Errorf("tool message %d:\n got %s %s\nwant %s %s", i, got[i][0], got[i][1], w[0], w[1])
		}
	}
	crash := got[8][1]
	// SIGKILL seen from outside: the server's own status, or bwrap's
	// (128+9) when the server runs confined.
	for _, w := range []string{`{"error": "mcp server \"mem\": the server exited during the call to read_graph; it will be restarted for the next call (`,
		"Knowledge Graph MCP Server running on stdio"} {
		if !strings.Contains(crash, w) {
			t.Errorf("the crash's tool message lacks %s: %s", w, crash)
		}
	}
	if !strings.Contains(crash, "(signal: killed)") && !strings.Contains(crash, "(exit status 137)") {
		t.Errorf("the crash's tool message does not say the server was killed: %s", crash)
	}
	stats := r["tool_stats"].(map[string]any)
	for name, want := range map[string][2]float64{
		"mcp_fs_read_text_file":   {1, 0},
		"mcp_fs_list_directory":   {1, 0},
		"mcp_mem_create_entities": {2, 0},
		"mcp_mem_open_nodes":      {2, 0},
		"mcp_mem_read_graph":      {0, 1},
		"mcp_every_echo":          {1, 0},
		"mcp_every_get-sum":       {1, 0},
		"mcp_everystdio_echo":     {1, 0},
		"terminal":                {2, 0},
	} {
		s, _ := stats[name].(map[string]any)
		if s == nil || s["success"] != want[0] || s["failure"] != want[1] {
			t.Errorf("tool_stats[%s] = %v, want success %v failure %v", name, s, want[0], want[1])
		}
	}
	mustVerify(t, out)
	if left := markedProcesses(mark); len(left) > 0 {
		t.Errorf("server processes left after the run: %v", left)
	}
}

// toolMessages returns the name and the content (its JSON text as it
// stands in the turn) of every tool response of a record, in order.
func toolMessages(t *testing.T, rec map[string]any) [][2]string {
	t.Helper()
	var out [][2]string
	for _, turn := range rec["conversations"].([]any) {
		m := turn.(map[string]any)
		if m["from"] != "tool" {
			continue
		}
		rest := m["value"].(string)
		for {
			_, after, ok := strings.Cut(rest, "<tool_response>\n")
			if !ok {
				break
			}
			body, next, ok := strings.Cut(after, "\n</tool_response>")
			if !ok {
				t.Fatalf("unterminated tool_response: %s", after)
			}
			var r struct {
				Name    string          `json:"name"`
				Content json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Fatalf("tool_response %s: %v", body, err)
			}
			out = append(out, [2]string{r.Name, string(r.Content)})
			rest = next
		}
	}
	return out
}

// TestKillNineLeavesNoRealMCPServer kills hermes-pipe with SIGKILL while
// a rollout holds three real stdio servers, one busy in a call: memory run
// and server-everything through npx (npx starts npm exec, which starts
// sh, which starts the server: grandchildren the kernel's parent-death
// signal does not reach; the everything server, busy in a timer, does not
// end when its stdin closes), filesystem run by node, and memory run by a
// shell that leaves a child behind which never reads its stdin. Every process carrying the rollout's
// servers' mark must go.
func TestKillNineLeavesNoRealMCPServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	scripts := npmDir(t)
	bin := buildBinary(t)
	mark := newMark(t)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	env := `"` + markEnv + `": ` + q(mark)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {
  "mem": {"command": "npx", "args": ["--no-install", "--prefix", `+q(scripts)+`, "mcp-server-memory"],
          "env": {`+env+`, "MEMORY_FILE_PATH": "${workdir}/memory.jsonl", "HOME": "${workdir}", "npm_config_offline": "true", "npm_config_update_notifier": "false"}},
  "fs": {"command": "node", "args": [`+q(npmEntry(scripts, "server-filesystem"))+`, "${workdir}"], "env": {`+env+`}},
  "every": {"command": "npx", "args": ["--no-install", "--prefix", `+q(scripts)+`, "mcp-server-everything", "stdio"],
            "env": {`+env+`, "HOME": "${workdir}", "npm_config_offline": "true", "npm_config_update_notifier": "false"},
            "tools": {"include": ["trigger-long-running-operation"]}},
  "wrapped": {"command": "sh", "args": ["-c", "sleep 100000 & exec node \"$0\"", `+q(npmEntry(scripts, "server-memory"))+`],
              "env": {`+env+`, "MEMORY_FILE_PATH": "${workdir}/wrapped.jsonl"}}
}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, url := startFakeServer(t, fakellm.Config{Scripts: mustScripts(t, `{"scripts": [{"match": "^hold$", "steps": [
  {"tool_calls": [{"name": "mcp_mem_read_graph", "arguments": {}}, {"name": "mcp_fs_list_directory", "arguments": {"path": "."}},
                  {"name": "mcp_wrapped_read_graph", "arguments": {}},
                  {"name": "mcp_every_trigger-long-running-operation", "arguments": {"duration": 600, "steps": 1}}]},
  {"content": "never reached"}]}]}`)})
	prompts := writePrompts(t, `{"prompt": "hold"}`)
	// Unconfined: the servers' own processes and grandchildren are then
	// host processes that only the guard can take down (confined, bwrap's
	// PID namespace dies with it; TestKillNineLeavesNoMCPServer covers
	// that), and npx finds its packages from the working folder.
	cmd := exec.Command(bin, "generate", "--prompts", prompts, "--out", filepath.Join(t.TempDir(), "out"), "--base-url", url, "--model", "m",
		"--progress", "none", "--sandbox", "local", "--local-isolation", "none", "--mcp-config", cfg, "--toolsets", "mcp-mem,mcp-fs,mcp-every,mcp-wrapped")
	cmd.Env = killedRunEnv(t)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitRequests(t, fs, 1, cmd)
	// The calls are made in order: once the everything server runs, the
	// memory and filesystem servers answered and still run (until the
	// rollout ends, which it does not).
	var procs map[int]string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		procs = markedProcesses(mark)
		// The servers themselves (npx's grandchildren for two of them).
		running := map[string]bool{}
		for _, cl := range procs {
			for _, s := range []string{".bin/mcp-server-everything", "server-filesystem/dist", ".bin/mcp-server-memory", "server-memory/dist"} {
				if strings.HasPrefix(cl, "node ") && strings.Contains(cl, s) {
					running[s] = true
				}
			}
			if cl == "sleep 100000" {
				running[cl] = true
			}
		}
		if len(running) == 5 {
			break
		}
		if time.Now().After(deadline) || processGone(cmd.Process.Pid) {
			t.Fatalf("servers never all started (%v): %s", procs, stderr.String())
		}
	}
	t.Logf("server processes before kill -9: %v", procs)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	for deadline := time.Now().Add(30 * time.Second); len(markedProcesses(mark)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			left := markedProcesses(mark)
			for pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("server processes outlived kill -9 of hermes-pipe: %v", left)
		}
	}
}

// TestDemoMCPRowSet runs datasets/demo/mcp as its README says (from the
// repository root, so ${env:PWD} finds the servers): both rows complete,
// the filesystem server writes the note terminal then prints, the memory
// server reads back what it stored.
func TestDemoMCPRowSet(t *testing.T) {
	scripts := npmDir(t)
	root := filepath.Dir(scripts)
	t.Setenv("PWD", root)
	demo := filepath.Join(root, "datasets", "demo", "mcp")
	b, err := os.ReadFile(filepath.Join(demo, "fakellm-scripts.json"))
	if err != nil {
		t.Fatal(err)
	}
	url := startFake(t, fakellm.Config{}, string(b))
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := hp(t, "generate", "--prompts", filepath.Join(demo, "prompts.jsonl"), "--out", out, "--base-url", url, "--model", "demo",
		"--sandbox", "local", "--mcp-config", filepath.Join(demo, "mcp.json"), "--progress", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	recs := catRecords(t, out)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if r["outcome"] != "completed" {
			t.Fatalf("%v: outcome %v: %v", r["id"], r["outcome"], r["error"])
		}
		msgs := toolMessages(t, r)
		all, _ := json.Marshal(msgs)
		switch r["id"] {
		case "mcp-notes":
			var term struct{ Output string }
			if len(msgs) == 3 {
				_ = json.Unmarshal([]byte(msgs[1][1]), &term)
			}
			if len(msgs) != 3 || msgs[0][1] != `{"result": "Successfully wrote to note.md", "structuredContent": {"content": "Successfully wrote to note.md"}}` ||
				term.Output != "# Note\nwritten over MCP\n" || !strings.Contains(msgs[2][1], `[FILE] note.md`) {
				t.Errorf("mcp-notes: %s", all)
			}
		case "mcp-memory":
			if len(msgs) != 2 || !strings.Contains(msgs[1][1], `\"name\": \"Ada\"`) || !strings.Contains(msgs[1][1], "writes compilers") {
				t.Errorf("mcp-memory: %s", all)
			}
		default:
			t.Errorf("unexpected row %v", r["id"])
		}
	}
	mustVerify(t, out)
}
