package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
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
	Errors *BatchErrors `json:"errors"`
}

// BatchErrors are why a batch failed as a whole (its input file was
// refused, say).
type BatchErrors struct {
	Data []BatchError `json:"data"`
}

// BatchError is one of BatchErrors.
type BatchError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
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

// BatchClient speaks the OpenAI Batch API through openai-go's Files and
// Batches services, at the same base URL, key and retry policy (retry) as
// the chat client New returns, and turns batch output lines into the same
// Response a direct call gives. Create it with NewBatch; it is safe for
// concurrent use. Each method makes one HTTP request (retried after 429,
// 5xx and transport failures; ListBatches one per page), each attempt
// bounded by RequestTimeout, and blocks until it answers.
type BatchClient struct {
	c       *client
	files   openai.FileService
	batches openai.BatchService
}

// NewBatch checks opts as New does and returns a Batch API client. It does
// no I/O.
func NewBatch(opts Options) (*BatchClient, error) {
	cl, err := New(opts)
	if err != nil {
		return nil, err
	}
	c := cl.(*client)
	return &BatchClient{c: c, files: openai.NewFileService(c.reqOpts...), batches: openai.NewBatchService(c.reqOpts...)}, nil
}

// Body is the JSON body of a chat-completions request for req, exactly what
// Chat would send (non-streaming), for a batch input line.
func (b *BatchClient) Body(req Request) ([]byte, error) {
	body, err := b.c.chatBody(req)
	if err != nil {
		return nil, &Error{Op: "batch body", Err: err}
	}
	return body, nil
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
	var id string
	err := b.call(ctx, "upload batch file", func(actx context.Context) error {
		f, err := b.files.New(actx, openai.FileNewParams{
			File:    openai.File(bytes.NewReader(data), name, "application/jsonl"),
			Purpose: openai.FilePurposeBatch,
		})
		if err == nil {
			id = f.ID
		}
		return err
	})
	if err == nil && id == "" {
		err = &Error{Op: "upload batch file", Err: fmt.Errorf("%w: reply has no file id", ErrMalformed)}
	}
	return id, err
}

// CreateBatch starts a batch over the uploaded file fileID for
// /v1/chat/completions with a 24h window; metadata is kept with the batch
// (ListBatches shows it), so a caller that crashed before it could note the
// batch's id can find it again.
func (b *BatchClient) CreateBatch(ctx context.Context, fileID string, metadata map[string]string) (Batch, error) {
	return b.batch(ctx, "create batch", func(actx context.Context) (*openai.Batch, error) {
		return b.batches.New(actx, openai.BatchNewParams{
			InputFileID:      fileID,
			Endpoint:         openai.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
			Metadata:         shared.Metadata(metadata),
		})
	})
}

// GetBatch reads a batch's status, counts and file ids.
func (b *BatchClient) GetBatch(ctx context.Context, id string) (Batch, error) {
	return b.batch(ctx, "get batch "+id, func(actx context.Context) (*openai.Batch, error) {
		return b.batches.Get(actx, id)
	})
}

// CancelBatch asks the server to cancel a batch.
func (b *BatchClient) CancelBatch(ctx context.Context, id string) (Batch, error) {
	return b.batch(ctx, "cancel batch "+id, func(actx context.Context) (*openai.Batch, error) {
		return b.batches.Cancel(actx, id)
	})
}

// ListBatches calls f for every batch the server lists, newest first, page
// by page, until f returns false or the list ends.
func (b *BatchClient) ListBatches(ctx context.Context, f func(Batch) bool) error {
	q := openai.BatchListParams{Limit: openai.Int(100)}
	for {
		var data []openai.Batch
		hasMore := false
		err := b.call(ctx, "list batches", func(actx context.Context) error {
			page, err := b.batches.List(actx, q)
			if err == nil {
				data, hasMore = page.Data, page.HasMore
			}
			return err
		})
		if err != nil {
			return err
		}
		for i := range data {
			if !f(batchOf(&data[i])) {
				return nil
			}
		}
		if !hasMore || len(data) == 0 {
			return nil
		}
		q.After = openai.String(data[len(data)-1].ID)
	}
}

// FileContent downloads a file's bytes (a batch's output or error file).
func (b *BatchClient) FileContent(ctx context.Context, id string) ([]byte, error) {
	var out []byte
	err := b.call(ctx, "download file "+id, func(actx context.Context) error {
		resp, err := b.files.Content(actx, id)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, err = io.ReadAll(resp.Body)
		return err
	})
	return out, err
}

// batch makes one Batch API call that answers a batch object.
func (b *BatchClient) batch(ctx context.Context, op string, f func(actx context.Context) (*openai.Batch, error)) (Batch, error) {
	var out Batch
	err := b.call(ctx, op, func(actx context.Context) error {
		bt, err := f(actx)
		if err == nil {
			out = batchOf(bt)
		}
		return err
	})
	return out, err
}

// call makes the SDK call f, each attempt under RequestTimeout, retried as
// Chat is (retry).
func (b *BatchClient) call(ctx context.Context, op string, f func(actx context.Context) error) error {
	_, err := b.c.retry(ctx, op, func() (int, time.Duration, error) {
		actx, cancel := context.WithTimeout(ctx, b.c.opts.RequestTimeout)
		defer cancel()
		if err := f(actx); err != nil {
			return b.c.failure(ctx, actx, err)
		}
		return 0, -1, nil
	})
	return err
}

// batchOf is the part of the SDK's batch object hermes-pipe reads.
func batchOf(bt *openai.Batch) Batch {
	out := Batch{ID: bt.ID, Status: string(bt.Status), InputFileID: bt.InputFileID, OutputFileID: bt.OutputFileID,
		ErrorFileID: bt.ErrorFileID, Metadata: bt.Metadata}
	out.RequestCounts.Total = int(bt.RequestCounts.Total)
	out.RequestCounts.Completed = int(bt.RequestCounts.Completed)
	out.RequestCounts.Failed = int(bt.RequestCounts.Failed)
	if bt.JSON.Errors.Valid() {
		out.Errors = &BatchErrors{}
		for _, e := range bt.Errors.Data {
			out.Errors.Data = append(out.Errors.Data, BatchError{Code: e.Code, Message: e.Message})
		}
	}
	return out
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
		resp, err := b.c.parseReply(l.Response.Body)
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
