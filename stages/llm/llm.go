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
	// OnEvent, when set, is called for every event a streamed call
	// receives, so a caller that watches for a stalled call (cron's
	// inactivity timeout) counts streamed tokens as progress. It is not
	// sent.
	OnEvent func()
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
	// Logprobs are the reply's token log-probabilities when the client's
	// Sampling.Logprobs asked for them and the server sent some (Turn is
	// 0: the caller places it); nil otherwise, and nil for a reply that
	// held one of the endpoint's secrets (see Redactor).
	Logprobs *schemas.TurnLogprobs
}

// Client sends chat requests. Chat blocks until a response arrives or all
// retries are spent; the error then wraps the last failure. Implementations are
// safe for concurrent use.
type Client interface {
	Chat(ctx context.Context, req Request) (Response, error)
}
