package llm

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// retry is the one retry policy of every request this package makes (chat
// calls and the Batch API's): it calls attempt until it succeeds, fails
// with a failure not worth another attempt, MaxRetries retries are spent
// or ctx ends, and returns the attempts made. attempt returns the HTTP
// status of a failed reply (0 when none arrived: transport, timeout and
// decode failures, all retryable), the server's requested wait (-1 for
// none) and the failure. Between attempts it waits what the server asked
// (Retry-After or retry-after-ms, capped at RetryAfterMax) or else the
// jittered exponential backoff. The error is an *Error naming op.
//
// A caller of a Client or a BatchClient does not retry around it: a failure
// it returns has had its retries.
func (c *client) retry(ctx context.Context, op string, attempt func() (status int, retryAfter time.Duration, err error)) (int, error) {
	for n := 1; ; n++ {
		status, retryAfter, err := attempt()
		if err == nil {
			return n, nil
		}
		if ctx.Err() != nil {
			return n, &Error{Op: op, Status: status, Attempts: n, Err: ctx.Err()}
		}
		retryable := status == 0 || retryableStatus(status)
		if !retryable || n > c.opts.MaxRetries {
			return n, &Error{Op: op, Status: status, Attempts: n, Retryable: retryable, Err: c.red.Error(err)}
		}
		c.opts.Retries.count(status, err)
		wait := c.backoff(n)
		if retryAfter >= 0 {
			wait = min(retryAfter, c.opts.RetryAfterMax)
		}
		if err := c.opts.Sleep(ctx, wait); err != nil {
			return n, &Error{Op: op, Status: status, Attempts: n, Err: c.red.Error(err)}
		}
	}
}

// RetryCounts counts retries by cause: each field is the number of failed
// attempts of that kind that were tried again (the last failure of a
// request that gave up is not a retry). Its methods are safe for concurrent
// use and on a nil *RetryCounts.
type RetryCounts struct {
	RateLimited atomic.Int64 // HTTP 429
	Server      atomic.Int64 // HTTP 5xx
	Timeout     atomic.Int64 // Options.RequestTimeout hit
	Malformed   atomic.Int64 // unreadable reply
	Other       atomic.Int64 // connection failures, 408, 409
}

// count adds one retry of the failure with status and err.
func (r *RetryCounts) count(status int, err error) {
	if r == nil {
		return
	}
	switch {
	case status == http.StatusTooManyRequests:
		r.RateLimited.Add(1)
	case status >= 500:
		r.Server.Add(1)
	case errors.Is(err, ErrTimeout):
		r.Timeout.Add(1)
	case errors.Is(err, ErrMalformed):
		r.Malformed.Add(1)
	default:
		r.Other.Add(1)
	}
}

// Total is the number of retries of every cause.
func (r *RetryCounts) Total() int64 {
	if r == nil {
		return 0
	}
	return r.RateLimited.Load() + r.Server.Load() + r.Timeout.Load() + r.Malformed.Load() + r.Other.Load()
}

// backoff is the wait before attempt n+1, exponential with equal jitter: a
// uniform draw between half and all of min(BackoffMax, BackoffBase*2^(n-1)).
// The draws are a splitmix64 sequence from Options.Seed, so a test that
// sets the seed sees the same waits every run.
func (c *client) backoff(n int) time.Duration {
	d := c.opts.BackoffBase
	for i := 1; i < n && d < c.opts.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.opts.BackoffMax)
	u := float64(mix64(c.opts.Seed, c.jitter.Add(1))>>11) / (1 << 53)
	return d/2 + time.Duration(u*float64(d/2))
}

// mix64 is splitmix64 over a and b.
func mix64(a, b uint64) uint64 {
	z := a + b*0x9e3779b97f4a7c15 + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// parseRetryAfter reads retry-after-ms (milliseconds) or Retry-After
// (seconds or an HTTP date) and returns -1 when neither is usable.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return -1
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs > 1e9 {
			return -1
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return -1
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
