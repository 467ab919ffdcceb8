package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config sets the server's behaviour. The zero value is a working summariser
// with no latency and no faults.
type Config struct {
	// Seed changes every generated text, id and random choice.
	Seed uint64
	// Scripts are tried in order; the first whose Match finds the first user
	// message wins.
	Scripts []Script

	// Latency is added to every reply; Jitter adds up to that much more,
	// chosen by a hash of the request so that it is reproducible.
	Latency time.Duration
	Jitter  time.Duration
	// ChunkDelay is waited before each event of a streamed reply, after
	// the first (a slow stream that keeps sending).
	ChunkDelay time.Duration

	// Fail429, Fail500, Malformed and Hang are probabilities in [0, 1] that
	// an attempt is answered by that fault. The choice hashes the request and
	// how many identical requests came before, so retries see fresh draws.
	Fail429   float64
	Fail500   float64
	Malformed float64
	Hang      float64
	// MaxFaults caps the random faults per identical request, so a retrying
	// client eventually succeeds: 0 means 3, negative means no cap.
	MaxFaults int
	// RetryAfter is announced on 429 replies (default 200ms). It is sent as
	// Retry-After in whole seconds (rounded up) and as retry-after-ms.
	RetryAfter time.Duration
	// HangFor bounds a hang (default 10 minutes); a hang also ends when the
	// client goes away.
	HangFor time.Duration

	// SummaryWords is the length of the default summariser's reply in words
	// (one word counts as one token); 0 means 64. A prompt may ask for another
	// length with the directive [[words=N]].
	SummaryWords int
	// ReasoningField names the JSON field reasoning is sent in:
	// "reasoning_content" (default), "reasoning", or "think" for a leading
	// <think> block in the content.
	ReasoningField string
	// Model is reported in replies and by /v1/models; empty echoes the
	// request's model (or "fakellm" for /v1/models).
	Model string

	// BatchDelay is how long a batch stays in progress after it is created
	// (0: it is answered the first time it is read).
	BatchDelay time.Duration
	// BatchFail is the probability that one request inside a batch fails
	// (HTTP 500 in the error file), drawn from a hash of its custom_id.
	BatchFail float64
	// BatchExpire, when positive, makes the BatchExpire-th batch created
	// (1-based) expire with only the first half of its requests answered.
	BatchExpire int

	// KeepRequests keeps every chat request's body, for Requests: a test
	// sees exactly what reached the model.
	KeepRequests bool
}

// Server is the fake chat-completions endpoint. Create it with New; it is an
// http.Handler safe for concurrent use. Each request costs one JSON decode, a
// hash of the messages and one JSON encode; nothing is kept per connection.
type Server struct {
	cfg     Config
	scripts []Script

	attempts attemptTable
	stats    stats
	batch    batchStore

	keptMu sync.Mutex
	kept   []string // chat request bodies, with Config.KeepRequests
}

// Requests returns the body of every chat request received so far, in
// arrival order (nil unless Config.KeepRequests).
func (s *Server) Requests() []string {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	return append([]string(nil), s.kept...)
}

// New validates cfg (compiling the scripts' regexes if they came from Go) and
// returns a server. It panics on an invalid regex in a Go-built script; use
// ParseScripts to get an error instead.
func New(cfg Config) *Server {
	if cfg.MaxFaults == 0 {
		cfg.MaxFaults = 3
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 200 * time.Millisecond
	}
	if cfg.HangFor <= 0 {
		cfg.HangFor = 10 * time.Minute
	}
	if cfg.SummaryWords <= 0 {
		cfg.SummaryWords = 64
	}
	if cfg.ReasoningField == "" {
		cfg.ReasoningField = "reasoning_content"
	}
	// Deep-copy the scripts so the caller may reuse or change its values.
	scripts := make([]Script, len(cfg.Scripts))
	for i := range cfg.Scripts {
		scripts[i] = cfg.Scripts[i].clone()
		if err := scripts[i].compile(); err != nil {
			panic(fmt.Sprintf("fakellm: %v", err))
		}
	}
	cfg.Scripts = scripts
	s := &Server{cfg: cfg, scripts: scripts}
	s.attempts.init()
	s.stats.init()
	s.batch.init()
	return s
}

// ServeHTTP routes POST /v1/chat/completions (and /chat/completions),
// GET /v1/models (and /models) and GET /stats.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "/v1/chat/completions" || path == "/chat/completions":
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "use POST")
			return
		}
		s.chat(w, r)
	case path == "/v1/models" || path == "/models":
		model := s.cfg.Model
		if model == "" {
			model = "fakellm"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","created":0,"owned_by":"fakellm"}]}`, model)
	case path == "/stats":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Stats())
	default:
		if !s.serveBatchAPI(w, r, path) {
			writeError(w, http.StatusNotFound, "no route for "+r.URL.Path)
		}
	}
}

// isProbe reports whether body is a chat request with an empty messages
// array (llm.CheckChat's probe).
func isProbe(body []byte) bool {
	if !bytes.Contains(body, []byte(`"messages"`)) {
		return false
	}
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	return json.Unmarshal(body, &req) == nil && string(bytes.TrimSpace(req.Messages)) == "[]"
}

// chatRequest is the part of a chat-completions request the server reads.
type chatRequest struct {
	Model               string            `json:"model"`
	Messages            json.RawMessage   `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	MaxTokens           int               `json:"max_tokens"`
	MaxCompletionTokens int               `json:"max_completion_tokens"`
	Stream              bool              `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// text returns the message content whether it was sent as a string or as an
// array of content parts.
func (m *wireMessage) text() string {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || c[0] == 'n' {
		return ""
	}
	if c[0] == '"' {
		var s string
		_ = json.Unmarshal(c, &s)
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// plan is everything needed to answer one request.
type plan struct {
	id        string
	model     string
	hash      uint64
	fault     string
	retryAft  time.Duration
	hangFor   time.Duration
	reply     reply
	stream    bool
	withUsage bool
	script    string
	attempt   int
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err == nil && isProbe(b) {
		s.stats.probes.Add(1)
		writeError(w, http.StatusBadRequest, "messages must be a non-empty array")
		return
	}
	s.stats.requests.Add(1)
	s.stats.inFlight.Add(1)
	defer s.stats.inFlight.Add(-1)
	if err != nil {
		s.stats.count(http.StatusBadRequest, "")
		writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	if s.cfg.KeepRequests {
		s.keptMu.Lock()
		s.kept = append(s.kept, string(b))
		s.keptMu.Unlock()
	}
	body := bytes.NewReader(b)
	var req chatRequest
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		s.stats.count(http.StatusBadRequest, "")
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	var msgs []wireMessage
	if err := json.Unmarshal(req.Messages, &msgs); err != nil || len(msgs) == 0 {
		s.stats.count(http.StatusBadRequest, "")
		writeError(w, http.StatusBadRequest, "messages must be a non-empty array")
		return
	}
	p := s.plan(&req, msgs)

	if d := s.latency(p.hash, uint64(p.attempt)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			s.stats.count(499, p.script)
			return
		}
	}

	switch p.fault {
	case Fault429:
		ms := p.retryAft.Milliseconds()
		secs := (ms + 999) / 1000
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		w.Header().Set("retry-after-ms", strconv.FormatInt(ms, 10))
		s.stats.count(http.StatusTooManyRequests, p.script)
		s.stats.fault(p.fault)
		writeError(w, http.StatusTooManyRequests, "rate limited by fakellm")
		return
	case Fault500:
		s.stats.count(http.StatusInternalServerError, p.script)
		s.stats.fault(p.fault)
		writeError(w, http.StatusInternalServerError, "injected server error")
		return
	case FaultMalformed:
		s.stats.count(http.StatusOK, p.script)
		s.stats.fault(p.fault)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"trunc`, p.id)
		return
	case FaultEmpty:
		s.stats.count(http.StatusOK, p.script)
		s.stats.fault(p.fault)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"object":"chat.completion","created":0,"model":%q,"choices":[]}`, p.id, p.model)
		return
	case FaultHang:
		s.stats.fault(p.fault)
		t := time.NewTimer(p.hangFor)
		select {
		case <-t.C:
			s.stats.count(http.StatusGatewayTimeout, p.script)
			writeError(w, http.StatusGatewayTimeout, "hung")
		case <-r.Context().Done():
			t.Stop()
			s.stats.count(499, p.script)
		}
		return
	}
	s.stats.count(http.StatusOK, p.script)
	if p.fault == FaultCutStream {
		s.stats.fault(p.fault)
	} else {
		s.attempts.forget(p.hash)
	}
	if p.stream {
		s.writeStream(w, &p)
		return
	}
	s.writeJSON(w, &p)
}

// plan decides the reply and any fault for one request.
func (s *Server) plan(req *chatRequest, msgs []wireMessage) plan {
	hash := s.requestHash(req)
	p := plan{
		id:     fmt.Sprintf("chatcmpl-%016x", hash),
		model:  s.cfg.Model,
		hash:   hash,
		stream: req.Stream,
	}
	if p.model == "" {
		p.model = req.Model
	}
	p.withUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	p.attempt = s.attempts.next(hash)

	conv := scanConversation(msgs)
	st := s.planReply(&p, req, msgs, conv)
	p.reply.setTokens(msgs, maxTokens(req))
	s.planFault(&p, st)
	if p.fault == FaultBadToolArg {
		p.reply.cutToolArguments()
		p.fault = ""
		s.stats.fault(FaultBadToolArg)
	}
	return p
}

// requestHash is the FNV-1a hash of the configured seed and the request's
// messages: the same conversation gets the same reply.
func (s *Server) requestHash(req *chatRequest) uint64 {
	h := fnv.New64a()
	var seed [8]byte
	for i := range seed {
		seed[i] = byte(s.cfg.Seed >> (8 * i))
	}
	_, _ = h.Write(seed[:])
	_, _ = h.Write(req.Messages)
	return h.Sum64()
}

// conversation is what plan reads of the messages: the step (assistant turns
// so far), the first user message and the last tool result (-1: none).
type conversation struct {
	step                int
	firstUser, lastTool int
}

// scanConversation finds the step and the two messages plan reads. Only
// those two are decoded, however long the conversation.
func scanConversation(msgs []wireMessage) conversation {
	c := conversation{firstUser: -1, lastTool: -1}
	for i := range msgs {
		switch msgs[i].Role {
		case "assistant":
			c.step++
		case "user":
			if c.firstUser < 0 {
				c.firstUser = i
			}
		case "tool":
			c.lastTool = i
		}
	}
	return c
}

// maxTokens is the request's completion limit: the smaller of max_tokens
// and max_completion_tokens when both are set (0 = none).
func maxTokens(req *chatRequest) int {
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens > 0 && (maxTokens == 0 || req.MaxCompletionTokens < maxTokens) {
		maxTokens = req.MaxCompletionTokens
	}
	return maxTokens
}

// matchScript is the first script whose pattern matches the user message,
// with the pattern's submatches; nil when none does.
func (s *Server) matchScript(user string) (*Script, []string) {
	for i := range s.scripts {
		if m := s.scripts[i].re.FindStringSubmatch(user); m != nil {
			return &s.scripts[i], m
		}
	}
	return nil, nil
}

// planReply sets p's script name and reply: the matching script's step, a
// summary when the request offers no tools, a final answer otherwise. It
// returns the scripted step (nil when no script matched), whose fault wins
// over the random ones.
func (s *Server) planReply(p *plan, req *chatRequest, msgs []wireMessage, conv conversation) *Step {
	user := ""
	if conv.firstUser >= 0 {
		user = msgs[conv.firstUser].text()
	}
	sc, groups := s.matchScript(user)
	switch {
	case sc != nil:
		p.script = sc.Name
		if p.script == "" {
			p.script = sc.Match
		}
		st := sc.step(conv.step)
		vars := templateVars{user: user, step: conv.step, groups: groups}
		if conv.lastTool >= 0 {
			vars.lastTool = msgs[conv.lastTool].text()
		}
		p.reply = s.stepReply(st, &vars, p.hash, conv.step)
		return st
	case len(req.Tools) == 0:
		p.script = "(summary)"
		p.reply = s.summary(msgs, p.hash)
	default:
		p.script = "(default)"
		p.reply = defaultAgent(user, conv.step, p.hash)
	}
	return nil
}

var (
	runDirective    = regexp.MustCompile(`\[\[run=(.*?)\]\]`)
	answerDirective = regexp.MustCompile(`\[\[answer=(.*?)\]\]`)
)

// defaultAgent is the reply to a request with tools that no script matches,
// steered by directives in the first user message: each [[run=COMMAND]], in
// order, is one step calling the terminal tool with COMMAND (so an agent
// leaves files a verify command checks); then the final answer, "Answer: X"
// with [[answer=X]] (right or wrong as the prompt asks: the fake never sees
// the expected answer), else a one-line answer of generated words. A
// directive ends at the first "]]".
func defaultAgent(user string, step int, hash uint64) reply {
	if strings.Contains(user, "[[run=") {
		if runs := runDirective.FindAllStringSubmatch(user, -1); step < len(runs) {
			args, _ := json.Marshal(map[string]string{"command": runs[step][1]})
			var tc wireToolCall
			tc.ID = fmt.Sprintf("call_%08x_%d_0", uint32(hash), step)
			tc.Type = "function"
			tc.Function.Name = "terminal"
			tc.Function.Arguments = string(args)
			return reply{toolCalls: []wireToolCall{tc}, finish: "tool_calls"}
		}
	}
	if m := answerDirective.FindStringSubmatch(user); m != nil {
		return reply{content: "I worked it out.\nAnswer: " + m[1], finish: "stop"}
	}
	return reply{content: "Final answer: " + words(hash, 12) + ".", finish: "stop"}
}

// step is the script's step for the conversation's step number: past the
// last one, Final, or "Done." when the script has none.
func (s *Script) step(n int) *Step {
	switch {
	case n < len(s.Steps):
		return &s.Steps[n]
	case s.Final != nil:
		return s.Final
	}
	return &Step{Content: "Done."}
}

// setTokens sets the reply's token counts: the prompt's, the cached part
// (every message but the last), the completion's after truncating it to
// maxTokens (0 = no limit).
func (r *reply) setTokens(msgs []wireMessage, maxTokens int) {
	r.promptTokens = promptTokens(msgs)
	if len(msgs) > 1 {
		r.cachedTokens = promptTokens(msgs[:len(msgs)-1])
	}
	if maxTokens > 0 {
		r.truncate(maxTokens)
	}
	if r.completionTokens == 0 {
		r.completionTokens = countTokens(*r)
	}
}

// planFault sets p's fault, its Retry-After and its hang: the scripted
// step's fault for its first Times attempts, else a random one drawn from
// the configured rates while attempts stay under MaxFaults.
func (s *Server) planFault(p *plan, st *Step) {
	if st != nil && st.Fault != nil {
		f := st.Fault
		times := f.Times
		if times == 0 {
			times = 1
		}
		if times < 0 || p.attempt < times {
			p.fault = f.Kind
			p.retryAft = time.Duration(f.RetryAfter)
			p.hangFor = time.Duration(f.Hang)
		}
	} else if s.cfg.MaxFaults < 0 || p.attempt < s.cfg.MaxFaults {
		p.fault = s.randomFault(p.hash, p.attempt)
	}
	if p.retryAft <= 0 {
		p.retryAft = s.cfg.RetryAfter
	}
	if p.hangFor <= 0 {
		p.hangFor = s.cfg.HangFor
	}
}

// randomFault draws attempt's fault from the configured rates ("" = none),
// the same for the same request and attempt.
func (s *Server) randomFault(hash uint64, attempt int) string {
	u := unit(mix(hash, uint64(attempt)+0x9e37))
	switch {
	case u < s.cfg.Fail429:
		return Fault429
	case u < s.cfg.Fail429+s.cfg.Fail500:
		return Fault500
	case u < s.cfg.Fail429+s.cfg.Fail500+s.cfg.Malformed:
		return FaultMalformed
	case u < s.cfg.Fail429+s.cfg.Fail500+s.cfg.Malformed+s.cfg.Hang:
		return FaultHang
	}
	return ""
}

// cutToolArguments halves every tool call's arguments (the bad_tool_arg
// fault: JSON cut in the middle).
func (r *reply) cutToolArguments() {
	for i := range r.toolCalls {
		a := r.toolCalls[i].Function.Arguments
		r.toolCalls[i].Function.Arguments = a[:len(a)/2]
	}
}

// latency returns the configured delay for this request.
func (s *Server) latency(hash, salt uint64) time.Duration {
	d := s.cfg.Latency
	if s.cfg.Jitter > 0 {
		d += time.Duration(unit(mix(hash, 0x1a7e+salt)) * float64(s.cfg.Jitter))
	}
	return d
}

// stepReply renders one scripted step.
func (s *Server) stepReply(st *Step, vars *templateVars, hash uint64, step int) reply {
	rp := reply{
		content:   vars.expand(st.Content),
		reasoning: vars.expand(st.Reasoning),
		field:     st.ReasoningField,
		finish:    st.FinishReason,
	}
	for i, tc := range st.ToolCalls {
		var w wireToolCall
		w.ID = tc.ID
		if w.ID == "" {
			w.ID = fmt.Sprintf("call_%08x_%d_%d", uint32(hash), step, i)
		}
		w.Type = "function"
		w.Function.Name = tc.Name
		w.Function.Arguments = vars.expand(tc.args)
		rp.toolCalls = append(rp.toolCalls, w)
	}
	if rp.finish == "" {
		if len(rp.toolCalls) > 0 {
			rp.finish = "tool_calls"
		} else {
			rp.finish = "stop"
		}
	}
	return rp
}

var wordsDirective = regexp.MustCompile(`\[\[words=(\d+)\]\]`)

// summary is the default reply to a request without tools: deterministic
// text of the requested length.
func (s *Server) summary(msgs []wireMessage, hash uint64) reply {
	n := s.cfg.SummaryWords
	for i := len(msgs) - 1; i >= 0; i-- {
		t := msgs[i].text()
		if !strings.Contains(t, "[[words=") {
			continue
		}
		if m := wordsDirective.FindStringSubmatch(t); m != nil {
			if v, err := strconv.Atoi(m[1]); err == nil && v > 0 {
				n = v
				break
			}
		}
	}
	return reply{content: words(hash, n), finish: "stop", completionTokens: n}
}

// attemptTable counts identical requests so faults can be drawn per attempt.
// It is sharded to keep lock contention low; an entry is dropped once its
// request succeeds, so memory stays bounded by the requests still failing.
type attemptTable struct {
	shards [64]struct {
		mu sync.Mutex
		m  map[uint64]int
	}
}

func (t *attemptTable) init() {
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]int)
	}
}

// next returns how many identical requests came before this one and counts it.
func (t *attemptTable) next(h uint64) int {
	sh := &t.shards[h%uint64(len(t.shards))]
	sh.mu.Lock()
	n := sh.m[h]
	sh.m[h] = n + 1
	sh.mu.Unlock()
	return n
}

func (t *attemptTable) forget(h uint64) {
	sh := &t.shards[h%uint64(len(t.shards))]
	sh.mu.Lock()
	delete(sh.m, h)
	sh.mu.Unlock()
}

// Stats is the JSON shape served at /stats.
type Stats struct {
	Requests int64 `json:"requests"`
	// Probes counts requests with an empty messages array (answered 400,
	// as a real server does), the endpoint check a run makes before its
	// first row; they are not in Requests nor kept.
	Probes   int64            `json:"probes"`
	InFlight int64            `json:"in_flight"`
	ByStatus map[string]int64 `json:"by_status"`
	ByScript map[string]int64 `json:"by_script"`
	Faults   map[string]int64 `json:"faults"`
	// Batch API counters: batches created, requests answered inside
	// batches, and custom_ids submitted in more than one batch.
	Batches         int64 `json:"batches"`
	BatchRequests   int64 `json:"batch_requests"`
	BatchDuplicates int64 `json:"batch_duplicates"`
}

type stats struct {
	requests atomic.Int64
	probes   atomic.Int64
	inFlight atomic.Int64
	mu       sync.Mutex
	byStatus map[int]int64
	byScript map[string]int64
	faults   map[string]int64
}

func (st *stats) init() {
	st.byStatus = make(map[int]int64)
	st.byScript = make(map[string]int64)
	st.faults = make(map[string]int64)
}

func (st *stats) count(status int, script string) {
	st.mu.Lock()
	st.byStatus[status]++
	if script != "" {
		st.byScript[script]++
	}
	st.mu.Unlock()
}

func (st *stats) fault(kind string) {
	st.mu.Lock()
	st.faults[kind]++
	st.mu.Unlock()
}

// Stats returns a snapshot of the counters. Status 499 counts requests the
// client abandoned (hangs and latency cut short).
func (s *Server) Stats() Stats {
	out := Stats{
		Requests: s.stats.requests.Load(),
		Probes:   s.stats.probes.Load(),
		InFlight: s.stats.inFlight.Load(),
		ByStatus: map[string]int64{},
		ByScript: map[string]int64{},
		Faults:   map[string]int64{},
	}
	s.stats.mu.Lock()
	for k, v := range s.stats.byStatus {
		out.ByStatus[strconv.Itoa(k)] = v
	}
	for k, v := range s.stats.byScript {
		out.ByScript[k] = v
	}
	for k, v := range s.stats.faults {
		out.Faults[k] = v
	}
	s.stats.mu.Unlock()
	s.batch.mu.Lock()
	out.Batches, out.BatchRequests = int64(len(s.batch.order)), s.batch.requests
	for _, n := range s.batch.submitted {
		if n > 1 {
			out.BatchDuplicates++
		}
	}
	s.batch.mu.Unlock()
	return out
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	typ := "server_error"
	if status < 500 {
		typ = "invalid_request_error"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": strconv.Itoa(status)}})
	_, _ = w.Write(b)
}
