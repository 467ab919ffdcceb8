package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckReachable(t *testing.T) {
	// Any HTTP answer counts, even 404 from a server without /models.
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if err := CheckReachable(context.Background(), srv.URL+"/v1/"); err != nil {
		t.Fatalf("404 server: %v", err)
	}
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if err := CheckReachable(context.Background(), "http://"+addr+"/v1"); err == nil || errors.Is(err, ErrBadURL) {
		t.Fatalf("closed port: %v", err)
	}
	if err := CheckReachable(context.Background(), "http://bad host/v1"); !errors.Is(err, ErrBadURL) {
		t.Fatalf("malformed URL: %v", err)
	}
}

// CheckChat posts to the chat route with no message: a 401 or 404 there is
// ErrEndpoint naming the URL and status, the key redacted from the server's
// message; a 400 (the route and key are right) is no error.
func TestCheckChat(t *testing.T) {
	const key = "sk-check-chat-SECRET"
	status := http.StatusUnauthorized
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			status = http.StatusTeapot // fails the test below
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error": {"message": "bad key %s"}}`, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	err := CheckChat(context.Background(), srv.URL+"/v1", key, "m")
	if !errors.Is(err, ErrEndpoint) || !strings.Contains(err.Error(), "POST "+srv.URL+"/v1/chat/completions: 401 Unauthorized") || strings.Contains(err.Error(), key) {
		t.Fatalf("401: %v", err)
	}
	status = http.StatusBadRequest
	if err := CheckChat(context.Background(), srv.URL+"/v1", key, "m"); err != nil {
		t.Fatalf("400: %v", err)
	}
}
