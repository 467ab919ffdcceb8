package llm

import (
	"errors"
	"fmt"
)

// Sentinels for control flow. Test them with errors.Is on any error Chat
// returns.
var (
	// ErrRetryable marks a failure of the endpoint or the network (429, 408,
	// 409, 5xx, connection errors, timeouts, malformed replies) that was
	// still failing when the retries ran out. A rollout that ends with it is
	// an infrastructure fault worth running again (outcome api_error).
	ErrRetryable = errors.New("retryable llm failure")
	// ErrTimeout marks an attempt that hit Options.RequestTimeout.
	ErrTimeout = errors.New("llm request timed out")
	// ErrMalformed marks a reply that could not be read: bad JSON, no
	// choices, or a stream that ended before its finish reason.
	ErrMalformed = errors.New("malformed llm response")
	// ErrBadURL marks a base URL that is not a usable http(s) URL: a usage
	// error, found before any request.
	ErrBadURL = errors.New("bad base URL")
)

// Error is the error Chat returns once it gives up. It names the operation,
// the last HTTP status (0 when no response arrived) and the attempts spent,
// and wraps the last failure (plus ErrRetryable when that failure was of a
// retryable kind).
type Error struct {
	Op        string // e.g. "chat completions"
	Status    int    // last HTTP status, 0 if none
	Attempts  int    // HTTP attempts made
	Retryable bool   // whether the last failure was of a retryable kind
	Err       error  // last failure
}

// Error formats as "llm chat completions: status 429 after 6 attempts: ...".
func (e *Error) Error() string {
	status := "no response"
	if e.Status != 0 {
		status = fmt.Sprintf("status %d", e.Status)
	}
	word := "attempts"
	if e.Attempts == 1 {
		word = "attempt"
	}
	return fmt.Sprintf("llm %s: %s after %d %s: %v", e.Op, status, e.Attempts, word, e.Err)
}

// Unwrap exposes the last failure and, for retryable failures, ErrRetryable.
func (e *Error) Unwrap() []error {
	if e.Retryable {
		return []error{e.Err, ErrRetryable}
	}
	return []error{e.Err}
}

// IsRetryable reports whether err is a retryable endpoint failure (see
// ErrRetryable).
func IsRetryable(err error) bool { return errors.Is(err, ErrRetryable) }

// retryableStatus says which HTTP statuses are worth another attempt.
func retryableStatus(code int) bool {
	return code == 408 || code == 409 || code == 429 || code >= 500
}
