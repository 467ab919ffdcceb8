// Package s3test starts a real S3-compatible server on loopback for tests, so
// every test that needs object storage starts it the same way.
//
// It is for _test.go files only; it must not import stages or cmd.
package s3test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// Start starts the server with scripts/s3.sh in a temporary folder (stopped
// by PID at cleanup) and returns an s3:// URL of the bucket "hermes" whose
// key prefix is the literal PREFIX, for URL to replace. When
// HERMES_PIPE_S3_URL is set, that URL is returned and nothing is started.
// It sets test credentials in the environment, so the test must not be
// parallel. The first call on a machine builds the server (about 10 s); the
// binary is kept in the user cache folder unless HERMES_PIPE_S3_BIN names
// another.
func Start(t testing.TB) string {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if u := os.Getenv("HERMES_PIPE_S3_URL"); u != "" {
		return u
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "s3.sh")
	dir := t.TempDir()
	cmd := exec.Command("bash", script, "start", dir, "hermes")
	cmd.Env = os.Environ()
	if os.Getenv("HERMES_PIPE_S3_BIN") == "" {
		if cache, err := os.UserCacheDir(); err == nil {
			cmd.Env = append(cmd.Env, "HERMES_PIPE_S3_BIN="+filepath.Join(cache, "hermes-pipe-s3"))
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("start S3 server: %v\n%s%s", err, out, stderr.Bytes())
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("stop S3 server: %v\n%s", err, out)
		}
	})
	endpoint := strings.TrimSpace(string(out))
	return "s3://hermes/PREFIX?endpoint=" + endpoint + "&use_path_style=true&region=us-east-1&disable_https=true"
}

// URL returns base (from Start) with its key prefix set to prefix.
func URL(base, prefix string) string { return strings.Replace(base, "PREFIX", prefix, 1) }

// WithoutChecksums puts a proxy in front of the server of base (from Start)
// that strips the x-amz-checksum-* response headers, as many S3-compatible
// servers send none, and returns base pointing at the proxy (closed at
// cleanup).
func WithoutChecksums(t testing.TB, base string) string {
	t.Helper()
	m := regexp.MustCompile(`endpoint=([^&]+)`).FindStringSubmatch(base)
	if m == nil {
		t.Fatalf("no endpoint in %s", base)
	}
	target, err := url.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		for k := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-") {
				r.Header.Del(k)
			}
		}
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return strings.Replace(base, m[1], srv.URL, 1)
}
