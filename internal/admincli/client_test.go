package admincli

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestClientErrors checks the one line each kind of failure becomes.
func TestClientErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		token       string
		want        string
		wantDetails int
	}{
		{
			name: "apiv1.Error", status: 409, contentType: "application/json",
			body: `{"error":"source \"x\" already exists"}`, token: "t",
			want: `409 Conflict: source "x" already exists`,
		},
		{
			name: "apiv1.Error with details", status: 400, contentType: "application/json",
			body: `{"error":"invalid source","details":["a","b"]}`, token: "t",
			want: `400 Bad Request: invalid source`, wantDetails: 2,
		},
		{
			name: "plain text body", status: 502, contentType: "text/plain",
			body: "upstream connect error\nmore", token: "t",
			want: `502 Bad Gateway: upstream connect error`,
		},
		{
			name: "HTML body", status: 503, contentType: "text/html",
			body: "<html><body>down</body></html>", token: "t",
			want: `503 Service Unavailable`,
		},
		{
			name: "empty body", status: 404, token: "t",
			want: `404 Not Found`,
		},
		{
			name: "401 without a token", status: 401, contentType: "application/json",
			body: `{"error":"missing token"}`,
			want: `401 Unauthorized: missing token (no token given: set KICI_ADMIN_TOKEN or pass --token)`,
		},
		{
			name: "401 with a token", status: 401, contentType: "application/json",
			body: `{"error":"invalid token"}`, token: "t",
			want: `401 Unauthorized: invalid token (check KICI_ADMIN_TOKEN or --token)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.contentType != "" {
					w.Header().Set("Content-Type", tt.contentType)
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)
			c, err := newClient(srv.URL, tt.token, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			err = c.do(t.Context(), http.MethodGet, "/api/v1/x", nil, nil, &struct{}{})
			var ae *apiError
			if !errors.As(err, &ae) {
				t.Fatalf("got error %v, want an *apiError", err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if got := len(ae.details()); got != tt.wantDetails {
				t.Errorf("got %d details, want %d", got, tt.wantDetails)
			}
		})
	}
}

func TestClientTransportErrors(t *testing.T) {
	t.Parallel()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>a login page</html>"))
	}))
	t.Cleanup(html.Close)
	dead := deadURL(t)
	expired, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0))
	t.Cleanup(cancel)

	tests := []struct {
		name string
		base string
		ctx  context.Context
		want string
	}{
		{
			name: "connection refused",
			base: dead, ctx: t.Context(),
			want: "the orchestrator at " + dead + " is not reachable (connection refused); check KICI_ADMIN_URL or --url",
		},
		{
			name: "not JSON",
			base: html.URL, ctx: t.Context(),
			want: "answer of GET /api/v1/x is text/html, not JSON: is " + html.URL + " a kici orchestrator?",
		},
		{
			name: "deadline",
			base: html.URL, ctx: expired,
			want: "no answer from the orchestrator at " + html.URL + " within 1m0s (raise --timeout, or check the server)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := newClient(tt.base, "t", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			err = c.do(tt.ctx, http.MethodGet, "/api/v1/x", nil, nil, &struct{}{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestNewClientURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{name: "plain", in: "http://127.0.0.1:4000", want: "http://127.0.0.1:4000"},
		{name: "trailing slash", in: "http://127.0.0.1:4000/", want: "http://127.0.0.1:4000"},
		{name: "path prefix", in: "https://ci.example.com/kici/", want: "https://ci.example.com/kici"},
		{name: "no scheme", in: "127.0.0.1:4000", wantErr: true},
		{name: "other scheme", in: "ftp://example.com", wantErr: true},
		{name: "query", in: "http://example.com/?a=b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := newClient(tt.in, "", 0)
			if tt.wantErr {
				var ue usageError
				if !errors.As(err, &ue) {
					t.Errorf("got error %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.base != tt.want {
				t.Errorf("got base %q, want %q", c.base, tt.want)
			}
		})
	}
}
