package fakellm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// post sends body to the server and returns status, headers and body.
func post(t *testing.T, url, body string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, resp.Header, b
}

type decoded struct {
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			Reasoning        string  `json:"reasoning"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func decode(t *testing.T, b []byte) decoded {
	t.Helper()
	var d decoded
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if len(d.Choices) != 1 {
		t.Fatalf("want 1 choice, got %s", b)
	}
	return d
}

func chatBody(msgs string, extra string) string {
	return `{"model":"m","messages":` + msgs + extra + `}`
}

func TestSummaryDeterministicAndOrderIndependent(t *testing.T) {
	srv := httptest.NewServer(New(Config{Seed: 1}))
	defer srv.Close()
	a := chatBody(`[{"role":"user","content":"alpha"}]`, "")
	b := chatBody(`[{"role":"user","content":"beta"}]`, "")
	_, _, a1 := post(t, srv.URL, a)
	_, _, b1 := post(t, srv.URL, b)

	srv2 := httptest.NewServer(New(Config{Seed: 1}))
	defer srv2.Close()
	_, _, b2 := post(t, srv2.URL, b)
	_, _, a2 := post(t, srv2.URL, a)
	if !bytes.Equal(a1, a2) || !bytes.Equal(b1, b2) {
		t.Fatalf("replies depend on arrival order:\n%s\n%s", a1, a2)
	}
	if bytes.Equal(a1, b1) {
		t.Fatal("different requests got the same reply")
	}
	srv3 := httptest.NewServer(New(Config{Seed: 2}))
	defer srv3.Close()
	_, _, a3 := post(t, srv3.URL, a)
	if bytes.Equal(a1, a3) {
		t.Fatal("the seed does not change the reply")
	}
	d := decode(t, a1)
	if n := len(strings.Fields(*d.Choices[0].Message.Content)); n != 64 {
		t.Fatalf("default summary has %d words, want 64", n)
	}
	if d.Choices[0].FinishReason != "stop" || d.Usage.CompletionTokens != 64 || d.Usage.PromptTokens == 0 {
		t.Fatalf("unexpected finish/usage: %+v", d)
	}
}

func TestSummaryLengthDirectiveAndMaxTokens(t *testing.T) {
	srv := httptest.NewServer(New(Config{SummaryWords: 5}))
	defer srv.Close()
	_, _, b := post(t, srv.URL, chatBody(`[{"role":"system","content":"be brief"},{"role":"user","content":"Summarise this. [[words=30]]"}]`, ""))
	d := decode(t, b)
	if n := len(strings.Fields(*d.Choices[0].Message.Content)); n != 30 {
		t.Fatalf("got %d words, want 30", n)
	}
	_, _, b = post(t, srv.URL, chatBody(`[{"role":"user","content":"Summarise. [[words=30]]"}]`, `,"max_tokens":7`))
	d = decode(t, b)
	if n := len(strings.Fields(*d.Choices[0].Message.Content)); n != 7 || d.Choices[0].FinishReason != "length" || d.Usage.CompletionTokens != 7 {
		t.Fatalf("max_tokens not respected: %s", b)
	}
	_, _, b = post(t, srv.URL, chatBody(`[{"role":"user","content":[{"type":"text","text":"parts [[words=3]]"}]}]`, `,"max_completion_tokens":10`))
	d = decode(t, b)
	if n := len(strings.Fields(*d.Choices[0].Message.Content)); n != 3 || d.Choices[0].FinishReason != "stop" {
		t.Fatalf("content parts / short reply: %s", b)
	}
}

const testScripts = `{"scripts":[
 {"name":"echo","match":"^echo (\\w+)","steps":[
   {"reasoning":"print {{m1}}","tool_calls":[{"name":"terminal","arguments":{"command":"echo {{m1}}","z":1,"a":2}}]},
   {"content":"Output: {{last_tool}} / {{last_tool_json}} at step {{step}}","reasoning":"seen it","reasoning_field":"think"}
 ],"final":{"content":"bye"}},
 {"name":"bad","match":"bad args","steps":[{"tool_calls":[{"id":"fixed","name":"t","arguments":"{\"x\": 1"}]}]},
 {"name":"flaky","match":"flaky (\\w+)","steps":[{"fault":{"kind":"{{KIND}}","retry_after":"3s","times":2},"content":"ok"}]}
]}`

func scriptsWith(t *testing.T, kind string) []Script {
	t.Helper()
	sc, err := ParseScripts([]byte(strings.ReplaceAll(testScripts, "{{KIND}}", kind)))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestScriptStepsTemplatesAndFinal(t *testing.T) {
	srv := httptest.NewServer(New(Config{Scripts: scriptsWith(t, "429")}))
	defer srv.Close()

	_, _, b := post(t, srv.URL, chatBody(`[{"role":"user","content":"echo hi there"}]`, `,"tools":[{"type":"function","function":{"name":"terminal"}}]`))
	d := decode(t, b)
	m := d.Choices[0].Message
	if m.ReasoningContent != "print hi" || len(m.ToolCalls) != 1 || d.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("step 0: %s", b)
	}
	if got := m.ToolCalls[0].Function.Arguments; got != `{"command":"echo hi","z":1,"a":2}` {
		t.Fatalf("arguments %q: key order or template lost", got)
	}
	if m.Content != nil {
		t.Fatalf("tool-call reply should have null content, got %q", *m.Content)
	}

	step1 := `[{"role":"user","content":"echo hi there"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"terminal","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"say \"hi\""}]`
	_, _, b = post(t, srv.URL, chatBody(step1, ""))
	d = decode(t, b)
	want := "<think>\nseen it\n</think>\nOutput: say \"hi\" / say \\\"hi\\\" at step 1"
	if got := *d.Choices[0].Message.Content; got != want || d.Choices[0].FinishReason != "stop" {
		t.Fatalf("step 1 content %q, want %q", got, want)
	}
	step2 := step1[:len(step1)-1] + `,{"role":"assistant","content":"x"},{"role":"user","content":"more"}]`
	_, _, b = post(t, srv.URL, chatBody(step2, ""))
	if got := *decode(t, b).Choices[0].Message.Content; got != "bye" {
		t.Fatalf("final step: %q", got)
	}

	_, _, b = post(t, srv.URL, chatBody(`[{"role":"user","content":"bad args please"}]`, ""))
	tc := decode(t, b).Choices[0].Message.ToolCalls[0]
	if tc.ID != "fixed" || tc.Function.Arguments != `{"x": 1` {
		t.Fatalf("raw invalid arguments not sent verbatim: %+v", tc)
	}
	st := New(Config{}).Stats()
	if st.Requests != 0 {
		t.Fatal("fresh server has requests")
	}
}

func TestScriptedFaultsThenSuccess(t *testing.T) {
	for _, kind := range []string{Fault429, Fault500, FaultMalformed, FaultEmpty, FaultCutStream} {
		t.Run(kind, func(t *testing.T) {
			s := New(Config{Scripts: scriptsWith(t, kind)})
			srv := httptest.NewServer(s)
			defer srv.Close()
			body := chatBody(`[{"role":"user","content":"flaky x"}]`, "")
			for i := 0; i < 2; i++ {
				resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					if kind == FaultCutStream {
						continue
					}
					t.Fatal(err)
				}
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				var d decoded
				jerr := json.Unmarshal(b, &d)
				switch kind {
				case Fault429:
					if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || resp.Header.Get("retry-after-ms") != "3000" {
						t.Fatalf("attempt %d: %d %v", i, resp.StatusCode, resp.Header)
					}
				case Fault500:
					if resp.StatusCode != 500 {
						t.Fatalf("attempt %d: status %d", i, resp.StatusCode)
					}
				case FaultMalformed:
					if jerr == nil {
						t.Fatalf("attempt %d: body is valid JSON: %s", i, b)
					}
				case FaultEmpty:
					if jerr != nil || len(d.Choices) != 0 {
						t.Fatalf("attempt %d: want empty choices, got %s", i, b)
					}
				case FaultCutStream:
					if rerr == nil && jerr == nil {
						t.Fatalf("attempt %d: body was not cut: %s", i, b)
					}
				}
			}
			code, _, b := post(t, srv.URL, body)
			if code != 200 || *decode(t, b).Choices[0].Message.Content != "ok" {
				t.Fatalf("third attempt: %d %s", code, b)
			}
			if st := s.Stats(); st.Faults[kind] != 2 || st.Requests != 3 || st.ByScript["flaky"] != 3 {
				t.Fatalf("stats: %+v", st)
			}
		})
	}
}

func TestRandomFaultsCappedPerIdenticalRequest(t *testing.T) {
	s := New(Config{Fail429: 1, MaxFaults: 2, RetryAfter: 1500 * time.Millisecond})
	srv := httptest.NewServer(s)
	defer srv.Close()
	body := chatBody(`[{"role":"user","content":"q"}]`, "")
	for i := 0; i < 2; i++ {
		code, h, _ := post(t, srv.URL, body)
		if code != 429 || h.Get("Retry-After") != "2" || h.Get("retry-after-ms") != "1500" {
			t.Fatalf("attempt %d: %d %v", i, code, h)
		}
	}
	if code, _, _ := post(t, srv.URL, body); code != 200 {
		t.Fatalf("third attempt: %d", code)
	}
	// After a success the count starts again for an identical request.
	if code, _, _ := post(t, srv.URL, body); code != 429 {
		t.Fatalf("fresh identical request: %d", code)
	}
	resp, err := http.Get(srv.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Requests != 4 || st.ByStatus["429"] != 3 || st.ByStatus["200"] != 1 || st.ByScript["(summary)"] != 4 {
		t.Fatalf("/stats: %+v", st)
	}
}

func TestRandomFaultRatesAreRoughlyHonoured(t *testing.T) {
	s := New(Config{Fail500: 0.3, Seed: 9})
	srv := httptest.NewServer(s)
	defer srv.Close()
	fails := 0
	const n = 200
	for i := 0; i < n; i++ {
		code, _, _ := post(t, srv.URL, chatBody(fmt.Sprintf(`[{"role":"user","content":"q%d"}]`, i), ""))
		if code == 500 {
			fails++
		}
	}
	if fails < n*15/100 || fails > n*45/100 {
		t.Fatalf("%d of %d failed, want about 30%%", fails, n)
	}
}

func TestHangEndsWhenClientLeaves(t *testing.T) {
	sc := []Script{{Name: "h", Match: "hang", Steps: []Step{{Fault: &Fault{Kind: FaultHang, Hang: Duration(time.Hour)}, Content: "late"}}}}
	s := New(Config{Scripts: sc})
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := &http.Client{Timeout: 100 * time.Millisecond}
	start := time.Now()
	_, err := c.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(`[{"role":"user","content":"hang"}]`, "")))
	if err == nil {
		t.Fatal("hang answered")
	}
	if time.Since(start) > time.Minute { // the hang lasts an hour
		t.Fatal("client timeout did not end the request")
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Stats().InFlight != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Stats(); st.InFlight != 0 || st.ByStatus["499"] != 1 {
		t.Fatalf("hang did not end with the client: %+v", st)
	}
	code, _, b := post(t, srv.URL, chatBody(`[{"role":"user","content":"hang"}]`, ""))
	if code != 200 || *decode(t, b).Choices[0].Message.Content != "late" {
		t.Fatalf("second attempt: %d %s", code, b)
	}
}

// sse reads a stream and returns the data payloads.
func sse(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestStreamMatchesNonStream(t *testing.T) {
	sc := []Script{{Name: "s", Match: "go", Steps: []Step{{
		Content: "calling two tools — ünïcödé text", Reasoning: "long reasoning that spans several chunks of the stream",
		ToolCalls: []ToolCallSpec{
			{Name: "a", Arguments: json.RawMessage(`{"path":"/some/long/path/that/needs/several/chunks"}`)},
			{Name: "b", Arguments: json.RawMessage(`"not json"`)},
		},
	}}}}
	s := New(Config{Scripts: sc, ReasoningField: "reasoning"})
	srv := httptest.NewServer(s)
	defer srv.Close()
	msgs := `[{"role":"user","content":"go"}]`
	_, _, b := post(t, srv.URL, chatBody(msgs, ""))
	want := decode(t, b)

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(msgs, `,"stream":true,"stream_options":{"include_usage":true}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := sse(t, resp.Body)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %v", events)
	}
	var content, reasoning strings.Builder
	args := map[int]*strings.Builder{}
	names := map[int]string{}
	finish := ""
	usage := 0
	for _, e := range events[:len(events)-1] {
		var c struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					Reasoning string  `json:"reasoning"`
					ToolCalls []struct {
						Index    int `json:"index"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		if c.Usage != nil {
			usage = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				content.WriteString(*ch.Delta.Content)
			}
			reasoning.WriteString(ch.Delta.Reasoning)
			for _, tc := range ch.Delta.ToolCalls {
				if args[tc.Index] == nil {
					args[tc.Index] = &strings.Builder{}
				}
				names[tc.Index] += tc.Function.Name
				args[tc.Index].WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	w := want.Choices[0]
	if content.String() != *w.Message.Content || reasoning.String() != w.Message.Reasoning || finish != w.FinishReason || usage != want.Usage.CompletionTokens {
		t.Fatalf("stream differs: %q %q %q %d vs %+v", content.String(), reasoning.String(), finish, usage, w)
	}
	for i, tc := range w.Message.ToolCalls {
		if names[i] != tc.Function.Name || args[i].String() != tc.Function.Arguments {
			t.Fatalf("tool call %d: %q %q vs %+v", i, names[i], args[i].String(), tc)
		}
	}
}

func TestConcurrentRequests(t *testing.T) {
	s := New(Config{Latency: 5 * time.Millisecond, Jitter: 5 * time.Millisecond, Fail500: 0.2})
	srv := httptest.NewServer(s)
	defer srv.Close()
	var wg sync.WaitGroup
	bodies := make([][]byte, 100)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(chatBody(fmt.Sprintf(`[{"role":"user","content":"%d"}]`, i%10), "")))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					bodies[i] = b
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := range bodies {
		if !bytes.Equal(bodies[i], bodies[i%10]) {
			t.Fatalf("identical requests %d and %d got different replies", i, i%10)
		}
	}
	if st := s.Stats(); st.InFlight != 0 || st.ByStatus["200"] != 100 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestParseScriptsErrors(t *testing.T) {
	for name, in := range map[string]string{
		"regex":  `{"scripts":[{"match":"("}]}`,
		"fault":  `{"scripts":[{"match":"x","steps":[{"fault":{"kind":"boom"}}]}]}`,
		"field":  `{"scripts":[{"match":"x","steps":[{"reasoning_field":"thought"}]}]}`,
		"noname": `{"scripts":[{"match":"x","steps":[{"tool_calls":[{"arguments":{}}]}]}]}`,
		"args":   `{"scripts":[{"match":"x","steps":[{"tool_calls":[{"name":"t","arguments":{bad}}]}]}]}`,
		"dur":    `{"scripts":[{"match":"x","steps":[{"fault":{"kind":"hang","hang":"soon"}}]}]}`,
		"field2": `{"scripts":[{"match":"x"}],"extra":1}`,
	} {
		if _, err := ParseScripts([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	sc, err := ParseScripts([]byte(`[{"match":"x","steps":[{"fault":{"kind":"hang","hang":1.5}}]}]`))
	if err != nil || time.Duration(sc[0].Steps[0].Fault.Hang) != 1500*time.Millisecond {
		t.Fatalf("bare array / numeric duration: %v %+v", err, sc)
	}
}

func TestRoutes(t *testing.T) {
	srv := httptest.NewServer(New(Config{Model: "fake-1"}))
	defer srv.Close()
	for path, want := range map[string]int{"/v1/models": 200, "/models": 200, "/stats": 200, "/nope": 404} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
		if path == "/v1/models" && !strings.Contains(string(b), `"fake-1"`) {
			t.Errorf("models: %s", b)
		}
	}
	resp, err := http.Get(srv.URL + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET chat: %d", resp.StatusCode)
	}
	if code, _, _ := post(t, srv.URL, `{"messages":`); code != 400 {
		t.Errorf("bad JSON: %d", code)
	}
	if code, _, _ := post(t, srv.URL, `{"messages":[]}`); code != 400 {
		t.Errorf("no messages: %d", code)
	}
}

// TestDefaultAgentDirectives: with tools and no script, each [[run=...]] is
// one terminal call in order, then [[answer=...]] is the final answer.
func TestDefaultAgentDirectives(t *testing.T) {
	srv := httptest.NewServer(New(Config{}))
	defer srv.Close()
	tools := `,"tools":[{"type":"function","function":{"name":"terminal"}}]`
	user := `{"role":"user","content":"Fix it. [[run=mkdir -p out && echo \"ok\" > out/done]] [[run=ls out]] [[answer=$1,234]]"}`
	call := `{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"terminal","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}`
	for step, want := range []string{`{"command":"mkdir -p out \u0026\u0026 echo \"ok\" \u003e out/done"}`, `{"command":"ls out"}`} {
		msgs := "[" + user + strings.Repeat(","+call, step) + "]"
		_, _, b := post(t, srv.URL, chatBody(msgs, tools))
		d := decode(t, b)
		tc := d.Choices[0].Message.ToolCalls
		if len(tc) != 1 || tc[0].Function.Name != "terminal" || d.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("step %d: %s", step, b)
		}
		var got, w map[string]string
		if err := json.Unmarshal([]byte(tc[0].Function.Arguments), &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
		if got["command"] != w["command"] {
			t.Errorf("step %d command %q, want %q", step, got["command"], w["command"])
		}
	}
	_, _, b := post(t, srv.URL, chatBody("["+user+","+call+","+call+"]", tools))
	d := decode(t, b)
	if c := d.Choices[0].Message.Content; c == nil || *c != "I worked it out.\nAnswer: $1,234" || len(d.Choices[0].Message.ToolCalls) != 0 {
		t.Fatalf("final step: %s", b)
	}
	// Without directives the default answer is unchanged.
	_, _, b = post(t, srv.URL, chatBody(`[{"role":"user","content":"hello"}]`, tools))
	if c := decode(t, b).Choices[0].Message.Content; c == nil || !strings.HasPrefix(*c, "Final answer: ") {
		t.Fatalf("no directive: %s", b)
	}
}
