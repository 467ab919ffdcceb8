package llm

import (
	"context"
	"fmt"
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
