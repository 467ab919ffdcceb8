package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// echoingEndpoint is an OpenAI-compatible endpoint that echoes each request
// (every header, the URL, the decoded basic-auth pair) back: in a 400 error
// body for a prompt holding "row-400", a 500 for "row-500", the reply's
// content for anything else. GET /v1/models answers 200, so the endpoint
// is reachable.
func echoingEndpoint(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
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
		msg, _ := json.Marshal(strings.Join(lines, "; "))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet:
			io.WriteString(w, `{"object":"list","data":[]}`)
		case strings.Contains(string(body), "row-400"):
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":%s,"type":"echo"}}`, msg)
		case strings.Contains(string(body), "row-500"):
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"error":{"message":%s,"type":"echo"}}`, msg)
		default:
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`, msg)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSecretsNeverReachTheOutputFolder runs generate against an endpoint
// that echoes its request headers, with an API key and a base URL holding a
// user name and password: no file of the output folder and nothing printed
// holds the key, the userinfo or its base64, and the failed records show
// the redaction.
func TestSecretsNeverReachTheOutputFolder(t *testing.T) {
	const key, user, pass = "sk-e2e-SECRET-KEY-42", "bob-operator", "hunter2-pw!"
	srv := echoingEndpoint(t)
	u, _ := url.Parse(srv.URL + "/v1")
	u.User = url.UserPassword(user, pass)
	base := u.String()
	forms := []string{key, user, pass, url.QueryEscape(pass), user + ":" + pass,
		base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))}

	for _, withKey := range []bool{true, false} {
		t.Run(fmt.Sprintf("key=%v", withKey), func(t *testing.T) {
			// Without a key the transport sends basic auth from the URL's
			// userinfo, which the endpoint decodes and echoes.
			if withKey {
				t.Setenv("HP_REDACT_TEST_KEY", key)
			} else {
				t.Setenv("HP_REDACT_TEST_KEY", "")
			}
			prompts := writePrompts(t, `{"prompt": "row-400"}`, `{"prompt": "row-500"}`, `{"prompt": "row-ok"}`)
			out := filepath.Join(t.TempDir(), "out")
			code, stdout, stderr := hp(t, "generate", "--prompts", prompts, "--out", out, "--base-url", base, "--api-key-env", "HP_REDACT_TEST_KEY",
				"--model", "m", "--progress", "none", "--max-retries", "1", "--toolsets", "terminal")
			if code != exitRowsFailed {
				t.Fatalf("exit %d, want %d (failed rows):\n%s", code, exitRowsFailed, stderr)
			}
			recs := catRecords(t, out)
			seen := map[string]bool{}
			for _, r := range recs {
				raw, _ := json.Marshal(r)
				conv, _ := json.Marshal(r["conversations"])
				switch {
				case strings.Contains(string(conv), "row-400"), strings.Contains(string(conv), "row-500"):
					e, _ := r["error"].(string)
					if !strings.Contains(e, "***") {
						t.Errorf("failed record's error shows no redaction: %s", raw)
					}
					seen["failed"] = true
				case strings.Contains(string(raw), "***"):
					seen["reply"] = true
				}
			}
			if !seen["failed"] || !seen["reply"] {
				t.Errorf("want failed records and a redacted echoed reply among %d records: %v", len(recs), seen)
			}
			// Every file of the output folder, and everything printed.
			texts := map[string]string{"stderr": stderr, "stdout": stdout}
			if err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				texts[p] = string(b)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if _, ok := texts[filepath.Join(out, "run.json")]; !ok {
				t.Fatalf("no run.json among %d files", len(texts))
			}
			if !strings.Contains(texts[filepath.Join(out, "run.json")], "http://***@127.0.0.1") {
				t.Errorf("run.json does not record the base URL with its userinfo redacted:\n%s", texts[filepath.Join(out, "run.json")])
			}
			for name, s := range texts {
				for _, f := range forms {
					if strings.Contains(s, f) {
						t.Errorf("%s holds the secret %q", name, f)
					}
				}
			}
			mustVerify(t, out)
		})
	}
}

// TestUnreachableBaseURLHidesUserinfo: the message of a base URL that
// cannot be reached names it without its userinfo.
func TestUnreachableBaseURLHidesUserinfo(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := "http://carol-user:s3cret-pass@" + srv.Listener.Addr().String() + "/v1"
	srv.Close()
	prompts := writePrompts(t, `{"prompt": "x"}`)
	code, stdout, stderr := hp(t, "generate", "--prompts", prompts, "--out", filepath.Join(t.TempDir(), "out"), "--base-url", base, "--model", "m", "--progress", "none")
	if code == 0 {
		t.Fatal("want a failure for an unreachable endpoint")
	}
	for _, f := range []string{"carol-user", "s3cret-pass"} {
		if strings.Contains(stderr+stdout, f) {
			t.Errorf("output holds %q: %s", f, stderr)
		}
	}
	if !strings.Contains(stderr, "http://***@") {
		t.Errorf("want the base URL with its userinfo redacted: %s", stderr)
	}
}
