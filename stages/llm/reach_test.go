package llm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
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
