package llm

import (
	"context"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Request is one chat-completions call.
type Request struct {
	Model       string
	Messages    []schemas.Message
	Tools       []schemas.Tool
	MaxTokens   int      // 0 = not sent
	Temperature *float64 // nil = not sent
}

// Response is the assistant's reply. Message.Reasoning holds reasoning from
// the `reasoning`/`reasoning_content` (and `reasoning_details`) fields, joined
// as Hermes joins them. A leading <think> block stays in Message.Content, as
// Hermes keeps it, unless Options.ThinkToReasoning moves it into Reasoning;
// SplitThink extracts it on demand.
type Response struct {
	Message      schemas.Message
	FinishReason string
	Usage        schemas.Usage
	Attempts     int  // HTTP attempts spent, retries included
	Batch        bool // the reply came through the Batch API (batch prices apply)
}

type activityKey struct{}

// WithActivity returns a context under which a streamed Chat calls f for
// every event it receives, so a caller that watches for a stalled call (cron's
// inactivity timeout) counts streamed tokens as progress.
func WithActivity(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, activityKey{}, f)
}

// activity returns the function WithActivity set on ctx, or a no-op.
func activity(ctx context.Context) func() {
	if f, ok := ctx.Value(activityKey{}).(func()); ok && f != nil {
		return f
	}
	return func() {}
}

// Client sends chat requests. Chat blocks until a response arrives or all
// retries are spent; the error then wraps the last failure. Implementations are
// safe for concurrent use.
type Client interface {
	Chat(ctx context.Context, req Request) (Response, error)
}
