package mcp

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
)

// TestHeaderSecretsRedactedFromErrors: an HTTP server that echoes its
// request headers into its JSON-RPC error does not get the configured
// Authorization token into the pre-flight's message, nor does a URL's
// userinfo show in a connection error.
func TestHeaderSecretsRedactedFromErrors(t *testing.T) {
	const tok = "mcp-tok-SECRET-0123"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var lines []string
		for k, vs := range r.Header {
			lines = append(lines, k+": "+strings.Join(vs, ","))
		}
		sort.Strings(lines)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID,
			"error": map[string]any{"code": -32600, "message": "denied; you sent: " + strings.Join(lines, "; ")}})
	}))
	t.Cleanup(srv.Close)
	u, _ := json.Marshal(srv.URL + "/mcp")
	cfg := mustParse(t, `{"mcpServers": {"web": {"url": `+string(u)+`, "headers": {"Authorization": "Bearer ${env:TOK}"}, "connect_timeout": 30}}}`, map[string]string{"TOK": tok})
	_, err := Start(context.Background(), cfg)
	if err == nil {
		t.Fatal("pre-flight passed against a server that refuses")
	}
	if strings.Contains(err.Error(), tok) {
		t.Fatalf("the error holds the header's token: %v", err)
	}
	if !strings.Contains(err.Error(), "Authorization: ***") {
		t.Fatalf("the error shows no redaction (does the server's reply reach it?): %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg = mustParse(t, `{"mcpServers": {"web": {"url": "http://mcp-user:mcp-pass-9@`+addr+`/mcp", "connect_timeout": 30}}}`, nil)
	_, err = Start(context.Background(), cfg)
	if err == nil {
		t.Fatal("pre-flight passed against a closed port")
	}
	if strings.Contains(err.Error(), "mcp-user") || strings.Contains(err.Error(), "mcp-pass-9") {
		t.Fatalf("the error holds the URL's userinfo: %v", err)
	}
}
