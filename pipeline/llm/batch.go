package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
)

// Batch API limits (OpenAI's): requests in one batch and bytes of one input
// file.
const (
	BatchMaxRequests = 50_000
	BatchMaxBytes    = 200 << 20
)

// Batch statuses as the Batch API reports them.
const (
	BatchValidating = "validating"
	BatchInProgress = "in_progress"
	BatchFinalizing = "finalizing"
	BatchCompleted  = "completed"
	BatchFailed     = "failed"
	BatchExpired    = "expired"
	BatchCancelling = "cancelling"
	BatchCancelled  = "cancelled"
)

// BatchEnded reports whether a batch in status will change no more.
func BatchEnded(status string) bool {
	switch status {
	case BatchCompleted, BatchFailed, BatchExpired, BatchCancelled:
		return true
	}
	return false
}

// Batch is the part of a Batch API batch object hermes-pipe reads.
type Batch struct {
	ID            string            `json:"id"`
	Status        string            `json:"status"`
	InputFileID   string            `json:"input_file_id"`
	OutputFileID  string            `json:"output_file_id"`
	ErrorFileID   string            `json:"error_file_id"`
	Metadata      map[string]string `json:"metadata"`
	RequestCounts struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
	Errors *struct {
		Data []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"data"`
	} `json:"errors"`
}

// BatchLine is one line of a batch input file.
type BatchLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// BatchResult is one line of a batch output or error file, read: the
// request's custom_id and either its Response or why it failed.
type BatchResult struct {
	CustomID string
	Response Response
	Err      error // nil when Response is a reply
}

// BatchClient speaks the OpenAI Batch API (files and batches) at the same
// base URL, key and retry policy as the chat client New returns, and turns
// batch output lines into the same Response a direct call gives. Create it
// with NewBatch; it is safe for concurrent use. Each method makes one HTTP
// request (retried after 429, 5xx and transport failures) and blocks until
// it answers.
type BatchClient struct {
	c    *client
	base string
}

// NewBatch checks opts as New does and returns a Batch API client. It does
// no I/O.
func NewBatch(opts Options) (*BatchClient, error) {
	cl, err := New(opts)
	if err != nil {
		return nil, err
	}
	c := cl.(*client)
	return &BatchClient{c: c, base: strings.TrimSuffix(c.opts.BaseURL, "/")}, nil
}

// Body is the JSON body of a chat-completions request for req, exactly what
// Chat would send (non-streaming), for a batch input line.
func (b *BatchClient) Body(req Request) ([]byte, error) {
	p, err := b.c.params(req)
	if err != nil {
		return nil, &Error{Op: "batch body", Err: err}
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	// Without HTML escaping, as the SDK sends a direct request: a body with
	// "<" in it is byte for byte the same on both paths.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, &Error{Op: "batch body", Err: err}
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// Line encodes one batch input line (with its newline) for a chat request
// body.
func Line(customID string, body []byte) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(BatchLine{CustomID: customID, Method: http.MethodPost, URL: "/v1/chat/completions", Body: body}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UploadFile uploads data as a file with purpose "batch" and returns its id.
func (b *BatchClient) UploadFile(ctx context.Context, name string, data []byte) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := b.do(ctx, "upload batch file", func() (*http.Request, error) {
		var body bytes.Buffer
		w := multipart.NewWriter(&body)
		if err := w.WriteField("purpose", "batch"); err != nil {
			return nil, err
		}
		fw, err := w.CreateFormFile("file", name)
		if err != nil {
			return nil, err
		}
		if _, err := fw.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/files", &body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", w.FormDataContentType())
		return req, nil
	}, &out)
	if err == nil && out.ID == "" {
		err = &Error{Op: "upload batch file", Err: fmt.Errorf("%w: reply has no file id", ErrMalformed)}
	}
	return out.ID, err
}

// CreateBatch starts a batch over the uploaded file fileID for
// /v1/chat/completions with a 24h window; metadata is kept with the batch
// (ListBatches shows it), so a caller that crashed before it could note the
// batch's id can find it again.
func (b *BatchClient) CreateBatch(ctx context.Context, fileID string, metadata map[string]string) (Batch, error) {
	body, err := json.Marshal(map[string]any{"input_file_id": fileID, "endpoint": "/v1/chat/completions",
		"completion_window": "24h", "metadata": metadata})
	if err != nil {
		return Batch{}, err
	}
	var out Batch
	err = b.do(ctx, "create batch", b.jsonReq(ctx, http.MethodPost, "/batches", body), &out)
	return out, err
}

// GetBatch reads a batch's status, counts and file ids.
func (b *BatchClient) GetBatch(ctx context.Context, id string) (Batch, error) {
	var out Batch
	err := b.do(ctx, "get batch "+id, b.jsonReq(ctx, http.MethodGet, "/batches/"+url.PathEscape(id), nil), &out)
	return out, err
}

// CancelBatch asks the server to cancel a batch.
func (b *BatchClient) CancelBatch(ctx context.Context, id string) (Batch, error) {
	var out Batch
	err := b.do(ctx, "cancel batch "+id, b.jsonReq(ctx, http.MethodPost, "/batches/"+url.PathEscape(id)+"/cancel", nil), &out)
	return out, err
}

// ListBatches calls f for every batch the server lists, newest first, page
// by page, until f returns false or the list ends.
func (b *BatchClient) ListBatches(ctx context.Context, f func(Batch) bool) error {
	after := ""
	for {
		path := "/batches?limit=100"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		var page struct {
			Data    []Batch `json:"data"`
			HasMore bool    `json:"has_more"`
		}
		if err := b.do(ctx, "list batches", b.jsonReq(ctx, http.MethodGet, path, nil), &page); err != nil {
			return err
		}
		for _, bt := range page.Data {
			if !f(bt) {
				return nil
			}
		}
		if !page.HasMore || len(page.Data) == 0 {
			return nil
		}
		after = page.Data[len(page.Data)-1].ID
	}
}

// FileContent downloads a file's bytes (a batch's output or error file).
func (b *BatchClient) FileContent(ctx context.Context, id string) ([]byte, error) {
	var out []byte
	err := b.do(ctx, "download file "+id, b.jsonReq(ctx, http.MethodGet, "/files/"+url.PathEscape(id)+"/content", nil), &out)
	return out, err
}

// ParseResult reads one line of a batch output or error file (also the
// output of `vllm run-batch`). A line that is not JSON or names no
// custom_id is an error; a request that failed is a BatchResult with Err.
func (b *BatchClient) ParseResult(line []byte) (BatchResult, error) {
	var l struct {
		CustomID string `json:"custom_id"`
		Response *struct {
			StatusCode int             `json:"status_code"`
			Body       json.RawMessage `json:"body"`
		} `json:"response"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return BatchResult{}, fmt.Errorf("batch result: %w", err)
	}
	if l.CustomID == "" {
		return BatchResult{}, errors.New("batch result: no custom_id")
	}
	r := BatchResult{CustomID: l.CustomID}
	switch {
	case l.Error != nil && (l.Error.Message != "" || l.Error.Code != ""):
		r.Err = fmt.Errorf("batch request failed: %s: %s", l.Error.Code, l.Error.Message)
	case l.Response == nil:
		r.Err = errors.New("batch request failed: no response")
	case l.Response.StatusCode != http.StatusOK:
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(l.Response.Body, &e)
		r.Err = fmt.Errorf("batch request failed: http %d: %s", l.Response.StatusCode, e.Error.Message)
	default:
		var cc openai.ChatCompletion
		if err := json.Unmarshal(l.Response.Body, &cc); err != nil {
			r.Err = fmt.Errorf("%w: batch response body: %v", ErrMalformed, err)
			break
		}
		resp, err := b.c.convert(&cc)
		if err != nil {
			r.Err = err
			break
		}
		resp.Attempts, resp.Batch = 1, true
		r.Response = resp
	}
	r.Err = b.c.red.Error(r.Err)
	return r, nil
}

func (b *BatchClient) jsonReq(ctx context.Context, method, path string, body []byte) func() (*http.Request, error) {
	return func() (*http.Request, error) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, b.base+path, rd)
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, nil
	}
}

// do sends the request mk builds, retrying as Chat does, and decodes a 2xx
// reply into out (a *[]byte takes the raw body).
func (b *BatchClient) do(ctx context.Context, op string, mk func() (*http.Request, error), out any) error {
	for attempt := 1; ; attempt++ {
		status, retryAfter, err := b.once(ctx, mk, out)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return &Error{Op: op, Status: status, Attempts: attempt, Err: ctx.Err()}
		}
		retryable := status == 0 || retryableStatus(status)
		if !retryable || attempt > b.c.opts.MaxRetries {
			return &Error{Op: op, Status: status, Attempts: attempt, Retryable: retryable, Err: b.c.red.Error(err)}
		}
		wait := b.c.backoff(attempt)
		if retryAfter >= 0 {
			wait = min(retryAfter, b.c.opts.RetryAfterMax)
		}
		if err := b.c.opts.Sleep(ctx, wait); err != nil {
			return &Error{Op: op, Status: status, Attempts: attempt, Err: b.c.red.Error(err)}
		}
	}
}

func (b *BatchClient) once(ctx context.Context, mk func() (*http.Request, error), out any) (status int, retryAfter time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, b.c.opts.RequestTimeout)
	defer cancel()
	req, err := mk()
	if err != nil {
		return 0, -1, err
	}
	req = req.WithContext(actx)
	if b.c.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.c.opts.APIKey)
	}
	resp, err := b.c.opts.HTTPClient.Do(req)
	if err != nil {
		return 0, -1, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, -1, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return resp.StatusCode, parseRetryAfter(resp.Header, b.c.opts.Now()), fmt.Errorf("http %d: %s", resp.StatusCode, msg)
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = body
		return 0, -1, nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return resp.StatusCode, -1, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return 0, -1, nil
}
