package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
)

// A direct call is what the SDK would send, to the byte: the same method,
// path, headers (the key, the SDK's own, those its options read from the
// environment) and body; and a reply is read as the SDK reads it: the
// body of a success, an *openai.Error of an error reply (or the error of
// reading one that has no error member), a redirect to another origin
// refused.
func TestDirectCallIsTheSDKsCall(t *testing.T) {
	t.Setenv("OPENAI_ORG_ID", "org-1")
	t.Setenv("OPENAI_PROJECT_ID", "proj-1")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Custom: yes")
	var mu sync.Mutex
	var seen []*http.Request
	var bodies []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"choices":[]}`)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen, bodies = append(seen, r), append(bodies, string(b))
		mu.Unlock()
		switch string(b) {
		case `{"case":"ok"}`:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"x","choices":[]}`)
		case `{"case":"api error"}`:
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(429)
			fmt.Fprint(w, `{"error":{"message":"slow down","type":"rate","code":"rl"}}`)
		case `{"case":"bare error"}`:
			w.WriteHeader(502)
			fmt.Fprint(w, `<html>bad gateway</html>`)
		case `{"case":"redirect"}`:
			http.Redirect(w, r, other.URL+"/v1/chat/completions", http.StatusTemporaryRedirect)
		}
	}))
	defer srv.Close()
	c, _ := newClient(t, srv.URL, Options{APIKey: "k-1"})
	cl := c.(*client)
	sdk := openai.NewClient(cl.reqOpts...)
	for _, kase := range []string{"ok", "api error", "bare error", "redirect"} {
		body := []byte(`{"case":"` + kase + `"}`)
		gotReply, gotErr := cl.direct.post(context.Background(), body)
		var wantReply []byte
		wantErr := sdk.Post(context.Background(), "chat/completions", body, &wantReply)
		if string(gotReply) != string(wantReply) {
			t.Errorf("%s: reply %q, the SDK's %q", kase, gotReply, wantReply)
		}
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("%s: error %v, the SDK's %v", kase, gotErr, wantErr)
		}
		var g, w *openai.Error
		if errors.As(gotErr, &g) != errors.As(wantErr, &w) {
			t.Fatalf("%s: error %T, the SDK's %T", kase, gotErr, wantErr)
		}
		if g != nil && (g.StatusCode != w.StatusCode || g.Message != w.Message || g.Code != w.Code || g.RawJSON() != w.RawJSON() ||
			g.Response.Header.Get("Retry-After") != w.Response.Header.Get("Retry-After")) {
			t.Errorf("%s: error %+v, the SDK's %+v", kase, g, w)
		}
	}
	if len(seen) != 8 {
		t.Fatalf("%d requests reached the server, want 8", len(seen))
	}
	for i := 0; i < len(seen); i += 2 {
		d, s := seen[i], seen[i+1]
		if d.Method != s.Method || d.URL.String() != s.URL.String() || d.Host != s.Host || d.ContentLength != s.ContentLength || bodies[i] != bodies[i+1] {
			t.Errorf("request %d: %s %s (host %s, %d bytes %s), the SDK's %s %s (host %s, %d bytes %s)", i/2, d.Method, d.URL, d.Host, d.ContentLength, bodies[i],
				s.Method, s.URL, s.Host, s.ContentLength, bodies[i+1])
		}
		if !reflect.DeepEqual(d.Header, s.Header) {
			t.Errorf("request %d: headers\n%v\nthe SDK's\n%v", i/2, d.Header, s.Header)
		}
	}
	h := seen[0].Header
	for k, v := range map[string]string{"Authorization": "Bearer k-1", "Openai-Organization": "org-1", "Openai-Project": "proj-1", "X-Custom": "yes"} {
		if h.Get(k) != v {
			t.Errorf("header %s is %q, want %q (all: %v)", k, h.Get(k), v, h)
		}
	}
	if !strings.HasPrefix(h.Get("User-Agent"), "OpenAI/Go") {
		t.Errorf("user agent %q", h.Get("User-Agent"))
	}
}
