package fakellm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Batch API part of the fake: files (upload, metadata, content) and
// batches (create, get, list, cancel). A batch is answered lazily: the first
// time it is read at least Config.BatchDelay after its creation, every
// request line is answered by the same code as a direct chat call (same
// plan, same body, same usage), so a summary is identical on both paths.

// fakeFile is one uploaded or generated file.
type fakeFile struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int    `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	data      []byte
}

type batchCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

type batchErrors struct {
	Object string `json:"object"`
	Data   []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Line    int    `json:"line,omitempty"`
	} `json:"data"`
}

// fakeBatch is one batch, in the API's JSON shape.
type fakeBatch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	Metadata         map[string]string `json:"metadata"`
	RequestCounts    batchCounts       `json:"request_counts"`
	Errors           *batchErrors      `json:"errors"`

	seq     int // 1-based creation order
	created time.Time
	lines   []BatchInputLine
}

// BatchInputLine is one parsed line of a batch input file.
type BatchInputLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// batchStore holds the files and batches; one mutex, as batches are few.
type batchStore struct {
	mu        sync.Mutex
	files     map[string]*fakeFile
	batches   map[string]*fakeBatch
	order     []*fakeBatch
	submitted map[string]int // custom_id → batches it was created in
	requests  int64          // batch requests answered
}

func (b *batchStore) init() {
	b.files = map[string]*fakeFile{}
	b.batches = map[string]*fakeBatch{}
	b.submitted = map[string]int{}
}

// BatchSubmitted returns, for every custom_id seen in a created batch, how
// many batches it was submitted in. Tests use it to prove no request was
// submitted twice.
func (s *Server) BatchSubmitted() map[string]int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	out := make(map[string]int, len(s.batch.submitted))
	for k, v := range s.batch.submitted {
		out[k] = v
	}
	return out
}

// serveBatchAPI routes the files and batches endpoints; it reports false
// for a path that is not one of them.
func (s *Server) serveBatchAPI(w http.ResponseWriter, r *http.Request, path string) bool {
	path = strings.TrimPrefix(path, "/v1")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case parts[0] == "files" && len(parts) == 1 && r.Method == http.MethodPost:
		s.uploadFile(w, r)
	case parts[0] == "files" && len(parts) == 2 && r.Method == http.MethodGet:
		s.batch.mu.Lock()
		f := s.batch.files[parts[1]]
		s.batch.mu.Unlock()
		if f == nil {
			writeError(w, http.StatusNotFound, "no file "+parts[1])
			return true
		}
		writeObject(w, f)
	case parts[0] == "files" && len(parts) == 3 && parts[2] == "content" && r.Method == http.MethodGet:
		s.batch.mu.Lock()
		f := s.batch.files[parts[1]]
		s.batch.mu.Unlock()
		if f == nil {
			writeError(w, http.StatusNotFound, "no file "+parts[1])
			return true
		}
		w.Header().Set("Content-Type", "application/jsonl")
		_, _ = w.Write(f.data)
	case parts[0] == "batches" && len(parts) == 1 && r.Method == http.MethodPost:
		s.createBatch(w, r)
	case parts[0] == "batches" && len(parts) == 1 && r.Method == http.MethodGet:
		s.listBatches(w, r)
	case parts[0] == "batches" && len(parts) == 2 && r.Method == http.MethodGet:
		s.batch.mu.Lock()
		defer s.batch.mu.Unlock()
		b := s.batch.batches[parts[1]]
		if b == nil {
			writeError(w, http.StatusNotFound, "no batch "+parts[1])
			return true
		}
		s.advance(b)
		writeObject(w, b)
	case parts[0] == "batches" && len(parts) == 3 && parts[2] == "cancel" && r.Method == http.MethodPost:
		s.batch.mu.Lock()
		defer s.batch.mu.Unlock()
		b := s.batch.batches[parts[1]]
		if b == nil {
			writeError(w, http.StatusNotFound, "no batch "+parts[1])
			return true
		}
		s.advance(b)
		if b.Status == "validating" || b.Status == "in_progress" {
			b.Status = "cancelled"
			s.finishBatch(b, 0)
		}
		writeObject(w, b)
	default:
		return false
	}
	return true
}

func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "want a multipart form: "+err.Error())
		return
	}
	purpose, name := "", ""
	var data []byte
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "multipart: "+err.Error())
			return
		}
		b, err := io.ReadAll(part)
		if err != nil {
			writeError(w, http.StatusBadRequest, "multipart: "+err.Error())
			return
		}
		switch part.FormName() {
		case "purpose":
			purpose = string(b)
		case "file":
			data, name = b, part.FileName()
		}
	}
	if purpose != "batch" || data == nil {
		writeError(w, http.StatusBadRequest, "want purpose=batch and a file")
		return
	}
	s.batch.mu.Lock()
	f := s.addFile(name, purpose, data)
	s.batch.mu.Unlock()
	writeObject(w, f)
}

// addFile stores data as a new file; the caller holds the lock.
func (s *Server) addFile(name, purpose string, data []byte) *fakeFile {
	id := fmt.Sprintf("file-%06d", len(s.batch.files)+1)
	f := &fakeFile{ID: id, Object: "file", Bytes: len(data), CreatedAt: created, Filename: name, Purpose: purpose, data: data}
	s.batch.files[id] = f
	return f
}

func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		InputFileID      string            `json:"input_file_id"`
		Endpoint         string            `json:"endpoint"`
		CompletionWindow string            `json:"completion_window"`
		Metadata         map[string]string `json:"metadata"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	if req.Endpoint != "/v1/chat/completions" || req.CompletionWindow != "24h" {
		writeError(w, http.StatusBadRequest, "want endpoint /v1/chat/completions and completion_window 24h")
		return
	}
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	f := s.batch.files[req.InputFileID]
	if f == nil {
		writeError(w, http.StatusBadRequest, "no file "+req.InputFileID)
		return
	}
	b := &fakeBatch{
		Object: "batch", Endpoint: req.Endpoint, InputFileID: f.ID, CompletionWindow: req.CompletionWindow,
		Status: "validating", CreatedAt: created, Metadata: req.Metadata, seq: len(s.batch.order) + 1, created: time.Now(),
	}
	b.ID = fmt.Sprintf("batch_%06d", b.seq)
	sc := bufio.NewScanner(bytes.NewReader(f.data))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	n := 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l BatchInputLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.CustomID == "" || l.URL != "/v1/chat/completions" {
			b.Status = "failed"
			b.Errors = &batchErrors{Object: "list"}
			b.Errors.Data = append(b.Errors.Data, struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Line    int    `json:"line,omitempty"`
			}{"invalid_request", "line is not a batch request", n})
			b.lines = nil
			break
		}
		b.lines = append(b.lines, l)
	}
	if b.Status != "failed" {
		for _, l := range b.lines {
			s.batch.submitted[l.CustomID]++
		}
	}
	b.RequestCounts.Total = len(b.lines)
	s.batch.batches[b.ID] = b
	s.batch.order = append(s.batch.order, b)
	writeObject(w, b)
}

func (s *Server) listBatches(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	after := r.URL.Query().Get("after")
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	// Newest first, as the API lists them.
	all := append([]*fakeBatch(nil), s.batch.order...)
	sort.Slice(all, func(i, j int) bool { return all[i].seq > all[j].seq })
	i := 0
	if after != "" {
		for i < len(all) && all[i].ID != after {
			i++
		}
		i++
	}
	page := []*fakeBatch{}
	for ; i < len(all) && len(page) < limit; i++ {
		s.advance(all[i])
		page = append(page, all[i])
	}
	writeObject(w, map[string]any{"object": "list", "data": page, "has_more": i < len(all)})
}

// advance moves b along its life: in progress until BatchDelay has passed
// since its creation, then answered (completed, or expired when it is the
// BatchExpire-th batch). The caller holds the lock.
func (s *Server) advance(b *fakeBatch) {
	if b.Status != "validating" && b.Status != "in_progress" {
		return
	}
	el := time.Since(b.created)
	if el < s.cfg.BatchDelay {
		b.Status = "in_progress"
		return
	}
	if s.cfg.BatchExpire > 0 && b.seq == s.cfg.BatchExpire {
		b.Status = "expired"
		s.finishBatch(b, len(b.lines)/2)
		return
	}
	b.Status = "completed"
	s.finishBatch(b, len(b.lines))
}

// finishBatch answers the first n requests of b into its output and error
// files. The caller holds the lock.
func (s *Server) finishBatch(b *fakeBatch, n int) {
	var out, errs bytes.Buffer
	for i, l := range b.lines[:n] {
		status, body := s.batchAnswer(l.Body, l.CustomID)
		line := map[string]any{
			"id": fmt.Sprintf("batch_req_%s_%d", b.ID, i), "custom_id": l.CustomID,
			"response": map[string]any{"status_code": status, "request_id": fmt.Sprintf("req_%d", i), "body": json.RawMessage(body)},
			"error":    nil,
		}
		enc, _ := json.Marshal(line)
		if status == http.StatusOK {
			out.Write(enc)
			out.WriteByte('\n')
			b.RequestCounts.Completed++
		} else {
			errs.Write(enc)
			errs.WriteByte('\n')
			b.RequestCounts.Failed++
		}
		s.batch.requests++
	}
	if out.Len() > 0 {
		id := s.addFile(b.ID+"_output.jsonl", "batch_output", out.Bytes()).ID
		b.OutputFileID = &id
	}
	if errs.Len() > 0 {
		id := s.addFile(b.ID+"_error.jsonl", "batch_output", errs.Bytes()).ID
		b.ErrorFileID = &id
	}
}

// batchAnswer answers one request of a batch with the direct path's plan
// and body. A request drawn to fail (Config.BatchFail, hashed with its
// custom_id) or given a fault is answered with an error status.
func (s *Server) batchAnswer(body []byte, customID string) (int, []byte) {
	errBody := func(status int, msg string) (int, []byte) {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "server_error"}})
		return status, b
	}
	if s.cfg.BatchFail > 0 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(customID))
		if unit(mix(h.Sum64(), s.cfg.Seed+0xba7c)) < s.cfg.BatchFail {
			s.stats.fault("batch_request")
			return errBody(http.StatusInternalServerError, "injected batch request failure")
		}
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return errBody(http.StatusBadRequest, "invalid JSON body: "+err.Error())
	}
	var msgs []wireMessage
	if err := json.Unmarshal(req.Messages, &msgs); err != nil || len(msgs) == 0 {
		return errBody(http.StatusBadRequest, "messages must be a non-empty array")
	}
	p := s.plan(&req, msgs)
	switch p.fault {
	case Fault429:
		s.stats.count(http.StatusTooManyRequests, p.script)
		return errBody(http.StatusTooManyRequests, "rate limited by fakellm")
	case Fault500, FaultMalformed, FaultEmpty, FaultHang:
		s.stats.count(http.StatusInternalServerError, p.script)
		return errBody(http.StatusInternalServerError, "injected server error")
	}
	s.attempts.forget(p.hash)
	s.stats.count(http.StatusOK, p.script)
	out, err := s.encodeReply(&p)
	if err != nil {
		return errBody(http.StatusInternalServerError, "encode reply: "+err.Error())
	}
	return http.StatusOK, bytes.TrimSuffix(out, []byte{'\n'})
}

func writeObject(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
