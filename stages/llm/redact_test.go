package llm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
)

const (
	testKey  = "sk-test-KEY-0123456789"
	testUser = "alice-user"
	testPass = "p@ss/w0rd!"
)

// secretForms are the strings none of which may survive redaction.
func secretForms() []string {
	basic := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + testPass))
	return []string{testKey, testUser, testPass, url.QueryEscape(testPass), url.PathEscape(testPass), testUser + ":" + testPass, basic}
}

func assertRedacted(t *testing.T, what, s string) {
	t.Helper()
	for _, f := range secretForms() {
		if strings.Contains(s, f) {
			t.Errorf("%s holds the secret %q: %s", what, f, s)
		}
	}
}

// echo describes the request as an endpoint that echoes it would: every
// header, the URL, and the decoded basic-auth pair.
func echo(r *http.Request) string {
	var lines []string
	for k, vs := range r.Header {
		for _, v := range vs {
			lines = append(lines, k+": "+v)
		}
	}
	sort.Strings(lines)
	lines = append(lines, "url: "+r.URL.String())
	if u, p, ok := r.BasicAuth(); ok {
		lines = append(lines, "basic: "+u+":"+p)
	}
	return strings.Join(lines, "; ")
}

// echoServer answers every request the way mode says, with the request
// echoed into the body.
func echoServer(t *testing.T, mode string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg, _ := json.Marshal(echo(r))
		switch mode {
		case "400", "500":
			w.Header().Set("Content-Type", "application/json")
			code := 400
			if mode == "500" {
				code = 500
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":{"message":%s,"type":"echo"}}`, msg)
		case "stream-error":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"error\":{\"message\":%s}}\n\n", msg)
		case "content":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s,"tool_calls":[{"id":"c1","type":"function","function":{"name":"terminal","arguments":%s}}]}}]}`, msg, mustJSON(t, map[string]string{"command": "echo " + echo(r)}))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(string(b))
	return string(b)
}

// withUserinfo puts the test's user name and password into srv's URL.
func withUserinfo(srv *httptest.Server) string {
	u, _ := url.Parse(srv.URL + "/v1")
	u.User = url.UserPassword(testUser, testPass)
	return u.String()
}

// TestEchoingEndpointNeverGetsSecretsIntoErrors: an endpoint that echoes its
// request (headers, basic auth) into an error or a reply puts no API key and
// no URL userinfo into what the client returns.
func TestEchoingEndpointNeverGetsSecretsIntoErrors(t *testing.T) {
	for _, mode := range []string{"400", "500", "stream-error", "content"} {
		for _, key := range []string{testKey, ""} {
			t.Run(fmt.Sprintf("%s/key=%v", mode, key != ""), func(t *testing.T) {
				srv := echoServer(t, mode)
				// The echo itself must carry a secret, or the test proves nothing.
				probe, _ := http.NewRequest(http.MethodGet, withUserinfo(srv), nil)
				if key != "" {
					probe.Header.Set("Authorization", "Bearer "+key)
				}
				resp, err := http.DefaultClient.Do(probe)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want := map[bool]string{true: testKey, false: testUser + ":" + testPass}[key != ""]; !strings.Contains(string(raw), want) {
					t.Fatalf("the echo server does not echo %q: %s", want, raw)
				}
				c, err := New(Options{BaseURL: withUserinfo(srv), APIKey: key, Model: "m", MaxRetries: -1, Stream: mode == "stream-error"})
				if err != nil {
					t.Fatal(err)
				}
				r, err := c.Chat(context.Background(), userReq("hi"))
				if mode == "content" {
					if err != nil {
						t.Fatal(err)
					}
					got := r.Message.Content + " " + r.Message.ToolCalls[0].Function.Arguments
					assertRedacted(t, "reply", got)
					if !strings.Contains(got, Redacted) || !json.Valid([]byte(r.Message.ToolCalls[0].Function.Arguments)) {
						t.Fatalf("reply not redacted as expected: %s", got)
					}
					return
				}
				if err == nil {
					t.Fatal("want an error")
				}
				assertRedacted(t, "error", err.Error())
				if !strings.Contains(err.Error(), Redacted) {
					t.Fatalf("error does not show the redaction: %v", err)
				}
			})
		}
	}
}

func TestBatchClientRedactsEchoedSecrets(t *testing.T) {
	srv := echoServer(t, "400")
	bc, err := NewBatch(Options{BaseURL: withUserinfo(srv), APIKey: testKey, Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bc.CreateBatch(context.Background(), "file-1", nil)
	if err == nil {
		t.Fatal("want an error")
	}
	assertRedacted(t, "create batch error", err.Error())
	if !strings.Contains(err.Error(), "Bearer "+Redacted) {
		t.Fatalf("error does not show the redacted bearer: %v", err)
	}
	line := fmt.Sprintf(`{"custom_id":"a","response":{"status_code":401,"body":{"error":{"message":"bad key Bearer %s"}}}}`, testKey)
	res, err := bc.ParseResult([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || strings.Contains(res.Err.Error(), testKey) || !strings.Contains(res.Err.Error(), Redacted) {
		t.Fatalf("batch result error not redacted: %v", res.Err)
	}
}

// TestTransportErrorsHideUserinfo: a refused connection's error names the
// URL; neither the user name nor the password may be in it.
func TestTransportErrorsHideUserinfo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	base := "http://" + url.UserPassword(testUser, testPass).String() + "@" + addr + "/v1"
	c, err := New(Options{BaseURL: base, APIKey: testKey, Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Chat(context.Background(), userReq("hi"))
	if err == nil {
		t.Fatal("want a connection error")
	}
	assertRedacted(t, "chat error", err.Error())
	err = CheckReachable(context.Background(), base)
	if err == nil {
		t.Fatal("want a connection error")
	}
	assertRedacted(t, "reachability error", err.Error())
	if !strings.Contains(err.Error(), "//***:***@"+addr) {
		t.Fatalf("want the URL with its userinfo redacted: %v", err)
	}
	_, err = New(Options{BaseURL: "ftp://" + testUser + ":" + testPass + "@host/"})
	if err == nil {
		t.Fatal("want a bad URL error")
	}
	assertRedacted(t, "bad URL error", err.Error())
}

func TestRedactorForms(t *testing.T) {
	r := NewRedactor(testKey, "http://"+url.UserPassword(testUser, testPass).String()+"@h/v1", "hdr-token-xyz")
	basic := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + testPass))
	in := strings.Join(append(secretForms(), "hdr-token-xyz", `{"k":"`+testKey+`"}`), " | ")
	got := r.String(in)
	assertRedacted(t, "redacted text", got)
	if strings.Contains(got, "hdr-token-xyz") || strings.Contains(got, basic) {
		t.Fatalf("extra secret or basic auth left: %s", got)
	}
	if want := `{"k":"***"}`; !strings.Contains(got, want) {
		t.Fatalf("JSON around a secret must stay valid: %s", got)
	}
	// A short user name is redacted only where it is clearly the user name.
	short := NewRedactor("", "http://ab:cdefgh@host/v1")
	if got := short.String("a tab and http://ab:***@host/v1 and cdefgh"); got != "a tab and http://***:***@host/v1 and ***" {
		t.Fatalf("short user name: %q", got)
	}
	var nilR *Redactor
	if nilR.String("x") != "x" || nilR.Error(nil) != nil || NewRedactor("", "http://h/v1").String(testKey) != testKey {
		t.Fatal("a redactor without secrets must change nothing")
	}
	// The redacted error keeps its chain.
	err := r.Error(fmt.Errorf("%w: key %s", ErrMalformed, testKey))
	if !strings.Contains(err.Error(), "key ***") || !errorsIs(err, ErrMalformed) {
		t.Fatalf("redacted error: %v", err)
	}
}

func errorsIs(err, target error) bool {
	for err != nil {
		if err == target {
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:p@h:8/v1":             "http://***@h:8/v1",
		"https://tok@h/v1?x=a@b":        "https://***@h/v1?x=a@b",
		"http://h/v1/a@b":               "http://h/v1/a@b",
		"http://h:8/v1":                 "http://h:8/v1",
		"not a url":                     "not a url",
		"http://us:p%40w@h:bad/v1":      "http://***@h:bad/v1",
		"x http://u:p@h/ and more text": "x http://***@h/ and more text",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
