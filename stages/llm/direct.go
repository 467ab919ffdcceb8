package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// A direct (non-streamed) chat call is posted by the client itself, as the
// SDK would post it: to the URL and with the headers the SDK makes for this
// endpoint (its user agent and platform headers, the key, what its options
// read from the environment), captured once from the SDK (postTemplate),
// and its reply or error read as the SDK reads them (post). The SDK's
// request machinery (option layers, header maps and clones, middleware,
// reading a reply of unknown size) was about a tenth of the CPU of a call
// and most of the client's allocations (stages/llm's BenchmarkChat).

// postTemplate is the request the SDK makes for a POST of path under
// reqOpts, captured before it reaches the transport.
func postTemplate(reqOpts []option.RequestOption, path string) (*http.Request, error) {
	var captured *http.Request
	errCaptured := errors.New("captured")
	capture := option.WithMiddleware(func(req *http.Request, _ option.MiddlewareNext) (*http.Response, error) {
		captured = req
		return nil, errCaptured
	})
	api := openai.NewClient(append(reqOpts[:len(reqOpts):len(reqOpts)], capture)...)
	if err := api.Post(context.Background(), path, []byte("{}"), nil); !errors.Is(err, errCaptured) || captured == nil {
		return nil, fmt.Errorf("llm client: making the request of %s: %v", path, err)
	}
	return captured, nil
}

// directPoster posts request bodies like the template.
type directPoster struct {
	url    string
	header http.Header
	client *http.Client // opts.HTTPClient whose transport refuses other origins, as the SDK's does
}

func newDirectPoster(tmpl *http.Request, hc *http.Client) *directPoster {
	origin := &url.URL{Scheme: tmpl.URL.Scheme, Host: tmpl.URL.Host}
	c := *hc
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = originTransport{origin: origin, next: next}
	return &directPoster{url: tmpl.URL.String(), header: tmpl.Header.Clone(), client: &c}
}

// errOrigin is the SDK's refusal of a request (a redirect) to another
// origin than the base URL's.
var errOrigin = errors.New("requestconfig: request URL origin must match the configured base URL")

// originTransport refuses requests to another origin than the base URL's,
// as the SDK's transport does.
type originTransport struct {
	origin *url.URL
	next   http.RoundTripper
}

func (t originTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !sameOrigin(req, t.origin) {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errOrigin
	}
	return t.next.RoundTrip(req)
}

// sameOrigin is the SDK's check: a canonical target (no opaque URL, a Host
// that names the URL's origin) of the same scheme, host and port.
func sameOrigin(req *http.Request, origin *url.URL) bool {
	if req.URL == nil || req.URL.Opaque != "" || req.RequestURI != "" {
		return false
	}
	if req.Host != "" && !originsMatch(&url.URL{Scheme: req.URL.Scheme, Host: req.Host}, req.URL) {
		return false
	}
	return originsMatch(req.URL, origin)
}

func originsMatch(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && effectivePort(a) == effectivePort(b)
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// post sends body and returns the reply's body. As the SDK: a reply of
// status 400 or more is an *openai.Error read from the reply's "error"
// member (or the error reading it), and when ctx has ended its error is
// returned.
func (d *directPoster) post(ctx context.Context, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = d.header.Clone()
	res, err := d.client.Do(req)
	if ctx.Err() != nil {
		if res != nil && res.Body != nil {
			_ = res.Body.Close()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	contents, readErr := readBody(res)
	if res.StatusCode >= 400 {
		if readErr != nil {
			return nil, readErr
		}
		res.Body = io.NopCloser(bytes.NewBuffer(contents))
		aerr := openai.Error{Request: req, Response: res, StatusCode: res.StatusCode}
		if err := aerr.UnmarshalJSON([]byte(gjson.GetBytes(contents, "error").Raw)); err != nil {
			return nil, err
		}
		return nil, &aerr
	}
	if readErr != nil {
		return nil, fmt.Errorf("error reading response body: %w", readErr)
	}
	return contents, nil
}

// readBody reads and closes res's body as io.ReadAll does, starting with
// room for all of it when its length is known.
func readBody(res *http.Response) ([]byte, error) {
	defer res.Body.Close()
	size := 512
	if n := res.ContentLength; n >= 0 && n < 64<<20 {
		size = int(n) + 1 // +1: the read that finds the end
	}
	b := make([]byte, 0, size)
	for {
		n, err := res.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}
