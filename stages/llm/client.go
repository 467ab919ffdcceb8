package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Options configure the client returned by New. Zero values mean defaults.
type Options struct {
	// BaseURL is the API root including its version path, e.g.
	// "http://127.0.0.1:8080/v1". Required.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none. The environment is
	// never read.
	APIKey string
	// Model is used when a Request names none.
	Model string
	// RequestTimeout bounds one HTTP attempt, streaming included (default
	// 10m). An attempt that runs over is cancelled and retried, so a hung
	// server costs one timeout per attempt, not the whole run.
	RequestTimeout time.Duration
	// MaxRetries is how many times a retryable failure is tried again after
	// the first attempt (default 5; negative means never).
	MaxRetries int
	// BackoffBase and BackoffMax shape the jittered exponential backoff
	// between attempts: attempt n waits between half and all of
	// min(BackoffMax, BackoffBase*2^(n-1)). Defaults 500ms and 30s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// RetryAfterMax caps a server's Retry-After / retry-after-ms (default
	// 5m); when present those replace the computed backoff.
	RetryAfterMax time.Duration
	// Stream makes every call a server-sent-events stream, assembled into
	// one Response (tool-call deltas included).
	Stream bool
	// Controller, when set, bounds concurrent requests across every client
	// that shares it and learns from 429s (see Controller).
	Controller *Controller
	// HTTPClient carries the requests (default: a client with a connection
	// pool sized for many concurrent rollouts and no overall timeout).
	HTTPClient *http.Client
	// Seed makes the backoff jitter reproducible.
	Seed uint64
	// Sampling is sent with every chat request (direct, streamed and
	// Batch API bodies alike); a Request's own MaxTokens or Temperature
	// replaces the client's.
	Sampling Sampling
	// ThinkToReasoning moves a leading <think>...</think> block of the
	// content into Message.Reasoning when the reply carries no reasoning
	// field. Off by default, which keeps content exactly as the model sent
	// it, as Hermes does (its trajectories keep inline think blocks in the
	// content and only wrap field reasoning in <think>).
	ThinkToReasoning bool
	// Retries, when set, counts every retry this client makes by its cause,
	// so a run can report them (several clients may share one).
	Retries *RetryCounts
	// Now and Sleep are the clock seams for tests (defaults time.Now and a
	// context-aware timer). Sleep must return ctx.Err() if ctx ends first.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// client is the openai-go backed Client.
type client struct {
	opts Options
	svc  openai.ChatCompletionService
	// reqOpts are the SDK options of every service this client's
	// endpoint serves (chat, and the batch client's files and batches).
	reqOpts []option.RequestOption
	// direct posts the bodies of non-streamed calls as the SDK would
	// (direct.go).
	direct *directPoster
	jitter atomic.Uint64
	// red takes the API key and the base URL's userinfo out of every error
	// and reply this client returns, so an endpoint that echoes its request
	// headers cannot put them into a record or a log.
	red *Redactor
	// warm holds the connections Prewarm opened, which the transport
	// takes first; nil when the caller gave its own HTTPClient.
	warm *warmPool
}

// New checks opts, fills defaults and returns a Client. It does no I/O.
func New(opts Options) (Client, error) {
	if opts.BaseURL == "" {
		return nil, errors.New("llm client: base URL is empty")
	}
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm client: base URL %q: want http(s)://host[:port]/path", RedactURL(opts.BaseURL))
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Minute
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 5
	} else if opts.MaxRetries < 0 {
		opts.MaxRetries = 0
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = 500 * time.Millisecond
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = 30 * time.Second
	}
	if opts.BackoffMax < opts.BackoffBase {
		opts.BackoffMax = opts.BackoffBase
	}
	if opts.RetryAfterMax <= 0 {
		opts.RetryAfterMax = 5 * time.Minute
	}
	var warm *warmPool
	if opts.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 4096
		tr.MaxIdleConnsPerHost = 4096
		warm = newWarmPool(tr.DialContext, tr.Proxy)
		tr.DialContext = warm.dial
		opts.HTTPClient = &http.Client{Transport: tr}
	}
	if err := opts.Sampling.check(); err != nil {
		return nil, fmt.Errorf("llm client: %w", err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = sleepCtx
	}
	reqOpts := []option.RequestOption{
		option.WithBaseURL(strings.TrimSuffix(opts.BaseURL, "/") + "/"),
		option.WithHTTPClient(opts.HTTPClient),
		option.WithMaxRetries(0), // the retry policy is ours
		option.WithMiddleware(inMemoryBody),
	}
	if opts.APIKey != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(opts.APIKey))
	}
	tmpl, err := postTemplate(reqOpts, "chat/completions")
	if err != nil {
		return nil, err
	}
	return &client{opts: opts, svc: openai.NewChatCompletionService(reqOpts...), reqOpts: reqOpts,
		direct: newDirectPoster(tmpl, opts.HTTPClient), red: NewRedactor(opts.APIKey, opts.BaseURL),
		warm: warm}, nil
}

// inMemoryBody gives the transport a request's body as the in-memory reader
// its GetBody makes, not the SDK's wrapper of it: net/http then writes the
// headers and the body of a call in one write (for a body it does not know
// it flushes the headers first: two writes, two packets, two reads at the
// server for every call).
func inMemoryBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
		if b, err := req.GetBody(); err == nil {
			req.Body = b
		}
	}
	return next(req)
}

// CloseIdleConnections closes the connections to the endpoint no call is
// using, pre-dialed ones included; the client stays usable (a later call
// connects again).
func (c *client) CloseIdleConnections() {
	if c.warm != nil {
		c.warm.expire()
	}
	c.opts.HTTPClient.CloseIdleConnections()
}

// Chat sends req and blocks until a reply arrives, retrying retryable
// failures with backoff (retry). Each attempt holds one Controller slot (if
// any) and is bounded by RequestTimeout; the slot is released while backing
// off. The error, if any, is an *Error wrapping the last failure; when ctx
// ends the error wraps ctx.Err().
func (c *client) Chat(ctx context.Context, req Request) (Response, error) {
	var call chatCall
	var err error
	if c.opts.Stream {
		var params openai.ChatCompletionNewParams
		params, err = c.params(req)
		call.params = &params
	} else {
		call.body, err = c.chatBody(req)
	}
	if err != nil {
		return Response{}, &Error{Op: "chat completions", Err: c.red.Error(err)}
	}
	var resp Response
	attempts, err := c.retry(ctx, "chat completions", func() (int, time.Duration, error) {
		r, status, retryAfter, err := c.attempt(ctx, call, req.OnEvent)
		resp = r
		return status, retryAfter, err
	})
	if err != nil {
		return Response{Attempts: attempts}, err
	}
	resp.Attempts = attempts
	return resp, nil
}

// chatCall is what an attempt sends: the SDK's parameters of a streamed
// call, the body of a direct one.
type chatCall struct {
	params *openai.ChatCompletionNewParams
	body   []byte
}

// attempt makes one HTTP attempt. status is the HTTP status of a failed
// reply (0 for transport, timeout and decode failures); retryAfter is the
// server's requested wait, or -1 when it named none. onEvent is the
// request's OnEvent.
func (c *client) attempt(ctx context.Context, call chatCall, onEvent func()) (resp Response, status int, retryAfter time.Duration, err error) {
	if ctl := c.opts.Controller; ctl != nil {
		release, err := ctl.Acquire(ctx)
		if err != nil {
			return Response{}, 0, -1, err
		}
		defer release()
	}
	actx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	if call.params != nil {
		resp, err = c.stream(actx, call.params, onEvent)
	} else {
		resp, err = c.once(actx, call.body)
	}
	if err == nil {
		if ctl := c.opts.Controller; ctl != nil {
			ctl.OnSuccess()
		}
		return resp, 0, -1, nil
	}
	status, retryAfter, err = c.failure(ctx, actx, err)
	if status == http.StatusTooManyRequests && c.opts.Controller != nil {
		c.opts.Controller.OnRateLimit()
	}
	return Response{}, status, retryAfter, err
}

// failure reads err, what an SDK call made under actx (ctx bounded by
// RequestTimeout) returned: the HTTP status of an error reply (0 for
// transport, timeout and decode failures), the server's Retry-After (-1
// when it named none) and the failure to report, a timeout wrapping
// ErrTimeout and an unreadable reply wrapping ErrMalformed. The chat and
// the batch paths share it.
func (c *client) failure(ctx, actx context.Context, err error) (status int, retryAfter time.Duration, _ error) {
	retryAfter = -1
	var apiErr *openai.Error
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.StatusCode
		if apiErr.Response != nil {
			retryAfter = parseRetryAfter(apiErr.Response.Header, c.opts.Now())
		}
		err = fmt.Errorf("http %d: %s", status, apiMessage(apiErr))
	case ctx.Err() != nil:
		err = ctx.Err()
	case errors.Is(err, context.DeadlineExceeded) || actx.Err() != nil:
		err = fmt.Errorf("%w after %s", ErrTimeout, c.opts.RequestTimeout)
	case errors.Is(err, ErrMalformed):
	case isDecodeError(err):
		err = fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return status, retryAfter, err
}

// apiMessage is the server's error message, or the status text.
func apiMessage(e *openai.Error) string {
	if e.Message != "" {
		return e.Message
	}
	return http.StatusText(e.StatusCode)
}

// isDecodeError reports whether err came from reading a reply body rather
// than from the transport.
func isDecodeError(err error) bool {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syn) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "unexpected end of JSON")
}

// once makes a non-streaming call with the request body and reads the
// reply (parseReply).
func (c *client) once(ctx context.Context, body []byte) (Response, error) {
	reply, err := c.direct.post(ctx, body)
	if err != nil {
		return Response{}, err
	}
	return c.parseReply(reply)
}

// usageOf converts the server's usage, details included.
func usageOf(u openai.CompletionUsage) schemas.Usage {
	return schemas.Usage{
		PromptTokens:       u.PromptTokens,
		CompletionTokens:   u.CompletionTokens,
		TotalTokens:        u.TotalTokens,
		CachedPromptTokens: u.PromptTokensDetails.CachedTokens,
		ReasoningTokens:    u.CompletionTokensDetails.ReasoningTokens,
	}
}

// finishMessage takes the endpoint's secrets out of the reply (a server
// that echoes its request into the content must not put the API key into a
// record) and applies ThinkToReasoning.
func (c *client) finishMessage(m *schemas.Message) {
	m.Content, m.Reasoning = c.red.String(m.Content), c.red.String(m.Reasoning)
	for i := range m.ToolCalls {
		m.ToolCalls[i].Function.Arguments = c.red.String(m.ToolCalls[i].Function.Arguments)
	}
	if !c.opts.ThinkToReasoning || m.Reasoning != "" {
		return
	}
	if think, rest, ok := SplitThink(m.Content); ok {
		m.Reasoning, m.Content = think, rest
	}
}

// params converts a Request into SDK parameters. Tool schemas are passed as
// raw JSON so their key order reaches the server unchanged.
func (c *client) params(req Request) (openai.ChatCompletionNewParams, error) {
	model := req.Model
	if model == "" {
		model = c.opts.Model
	}
	if model == "" {
		return openai.ChatCompletionNewParams{}, errors.New("no model named in the request or the client options")
	}
	if len(req.Messages) == 0 {
		return openai.ChatCompletionNewParams{}, errors.New("request has no messages")
	}
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	p.Messages = make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages))
	for i := range req.Messages {
		m, err := messageParam(&req.Messages[i])
		if err != nil {
			return p, fmt.Errorf("message %d: %w", i, err)
		}
		p.Messages = append(p.Messages, m)
	}
	for i := range req.Tools {
		t := req.Tools[i]
		if t.Type == "" {
			t.Type = "function"
		}
		raw, err := json.Marshal(&t)
		if err != nil {
			return p, fmt.Errorf("tool %q: %w", t.Function.Name, err)
		}
		fp := param.Override[openai.ChatCompletionFunctionToolParam](json.RawMessage(raw))
		p.Tools = append(p.Tools, openai.ChatCompletionToolUnionParam{OfFunction: &fp})
	}
	c.opts.Sampling.apply(&p, req)
	if c.opts.Stream {
		p.StreamOptions.IncludeUsage = openai.Bool(true)
	}
	return p, nil
}

func messageParam(m *schemas.Message) (openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case "system":
		return openai.SystemMessage(m.Content), nil
	case "developer":
		return openai.DeveloperMessage(m.Content), nil
	case "user":
		u := openai.UserMessage(m.Content)
		if m.Name != "" {
			u.OfUser.Name = openai.String(m.Name)
		}
		return u, nil
	case "tool":
		return openai.ToolMessage(m.Content, m.ToolCallID), nil
	case "assistant":
		a := openai.ChatCompletionAssistantMessageParam{}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = openai.String(m.Content)
		}
		if m.Name != "" {
			a.Name = openai.String(m.Name)
		}
		for _, tc := range m.ToolCalls {
			fc := openai.ChatCompletionMessageFunctionToolCallParam{
				ID: tc.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name:      tc.Function.Name,
					Arguments: tc.Function.Arguments,
				},
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &fc})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	}
	return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
}
