package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// CheckReachable fails fast when baseURL cannot be reached at all
// (connection refused, unknown host, TLS failure), so a run does not spend
// every row's retries on it. Any HTTP answer to GET <baseURL>/models, even a
// 404 from a server without that route, counts as reachable; it costs no
// token. It blocks for at most 15 s. A malformed URL wraps ErrBadURL; the
// other errors are net/http's, which name the request. The URL's userinfo
// is redacted from both.
func CheckReachable(ctx context.Context, baseURL string) error {
	red := NewRedactor("", baseURL)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/models", nil)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrBadURL, RedactURL(red.String(err.Error())))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return red.Error(err) // net/http's error names the request and the cause
	}
	resp.Body.Close()
	return nil
}

// ErrEndpoint marks a chat-completions route that answered the probe of
// CheckChat with 401, 403 or 404: a wrong path, key or model, which every
// row would meet again.
var ErrEndpoint = errors.New("chat endpoint refused")

// CheckChat probes the chat-completions route of baseURL itself with a
// request no server can answer with a completion (model, no messages,
// max_tokens 1), so it costs no token: a 400 or 422 says the route and the
// key are right. A 401, 403 or 404 wraps ErrEndpoint and names the URL, the
// status and the start of the server's message; a connection failure is
// returned as CheckReachable's; any other answer (429, 5xx) is left to the
// run's retries. It blocks for at most 15 s. The key and the URL's userinfo
// are redacted.
func CheckChat(ctx context.Context, baseURL, apiKey, model string) error {
	red := NewRedactor(apiKey, baseURL)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	url := strings.TrimRight(baseURL, "/") + "/chat/completions"
	body, _ := json.Marshal(map[string]any{"model": model, "messages": []any{}, "max_tokens": 1})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %s", ErrBadURL, RedactURL(red.String(err.Error())))
	}
	req.Header.Set("Content-Type", "application/json")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return red.Error(err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("%w: POST %s: %s: %s", ErrEndpoint, RedactURL(url), resp.Status,
			red.String(strings.TrimSpace(string(bytes.ToValidUTF8(msg, []byte("?"))))))
	}
	return nil
}
