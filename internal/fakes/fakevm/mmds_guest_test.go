package fakevm

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is an injected clock for token expiry.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newMMDSTest(t *testing.T, version string) (*httptest.Server, *mmdsStore, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	store := newMMDSStore(DefaultMMDSSizeLimit, clock.Now)
	store.configure(version, false)
	doc, err := decodeAny([]byte(`{"latest": {"meta-data": {"ami-id": "ami-1", "count": 3, "network": {"mac": "06:00"}, "list": ["a", "b"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.put(doc); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mmdsGuestHandler(store))
	t.Cleanup(srv.Close)
	return srv, store, clock
}

func mmdsDo(t *testing.T, srv *httptest.Server, method, path string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func token(t *testing.T, srv *httptest.Server, ttl string) string {
	t.Helper()
	status, hdr, body := mmdsDo(t, srv, http.MethodPut, "/latest/api/token", map[string]string{hdrTokenTTL: ttl})
	if status != http.StatusOK {
		t.Fatalf("PUT token: got %d %q, want 200", status, body)
	}
	if got := hdr.Get(hdrTokenTTL); got != ttl {
		t.Errorf("got TTL header %q, want %q echoed", got, ttl)
	}
	return body
}

func TestMMDSGuestV2(t *testing.T) {
	t.Parallel()
	srv, _, _ := newMMDSTest(t, "V2")
	tok := token(t, srv, "60")
	auth := map[string]string{hdrToken: tok}
	authJSON := map[string]string{hdrToken: tok, "Accept": "application/json"}
	tests := []struct {
		name, method, path string
		hdr                map[string]string
		status             int
		body               string
	}{
		{"no token", "GET", "/latest/meta-data", nil, 401, "No MMDS token provided."},
		{"bad token", "GET", "/latest/meta-data", map[string]string{hdrToken: "AAAA"}, 401, "MMDS token not valid."},
		{"too long token", "GET", "/latest/meta-data", map[string]string{hdrToken: strings.Repeat("A", 80)}, 401, "MMDS token not valid."},
		{"aws token header", "GET", "/latest/meta-data/ami-id", map[string]string{hdrTokenAWS: tok}, 200, "ami-1"},
		{"imds object", "GET", "/latest/meta-data", auth, 200, "ami-id\ncount\nlist\nnetwork/"},
		{"imds trailing slash", "GET", "/latest/meta-data/", auth, 200, "ami-id\ncount\nlist\nnetwork/"},
		{"imds string", "GET", "/latest/meta-data/ami-id", auth, 200, "ami-1"},
		{"imds number", "GET", "/latest/meta-data/count", auth, 501, "unsupported type"},
		{"imds double slashes", "GET", "//latest//meta-data/network/mac", auth, 200, "06:00"},
		{"json object", "GET", "/latest/meta-data/network", authJSON, 200, `{"mac":"06:00"}`},
		{"json string", "GET", "/latest/meta-data/ami-id", authJSON, 200, `"ami-1"`},
		{"json number", "GET", "/latest/meta-data/count", authJSON, 200, `3`},
		{"json array element", "GET", "/latest/meta-data/list/1", authJSON, 200, `"b"`},
		{"not found", "GET", "/latest/meta-data/nope", auth, 404, "Resource not found: /latest/meta-data/nope."},
		{"token without ttl", "PUT", "/latest/api/token", nil, 400, "Token time to live value not found."},
		{"token ttl zero", "PUT", "/latest/api/token", map[string]string{hdrTokenTTL: "0"}, 400, "Please provide a value between 1 and 21600."},
		{"token ttl too long", "PUT", "/latest/api/token", map[string]string{hdrTokenTTL: "21601"}, 400, "Please provide a value between 1 and 21600."},
		{"token ttl not a number", "PUT", "/latest/api/token", map[string]string{hdrTokenTTL: "soon"}, 400, "Invalid value"},
		{"token forwarded", "PUT", "/latest/api/token", map[string]string{hdrTokenTTL: "60", hdrForwarded: "1.2.3.4"}, 400, "X-Forwarded-For"},
		{"put elsewhere", "PUT", "/latest/meta-data", map[string]string{hdrTokenTTL: "60"}, 404, "Resource not found"},
		{"other method", "POST", "/latest/meta-data", auth, 405, "Not allowed HTTP method."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, hdr, body := mmdsDo(t, srv, tt.method, tt.path, tt.hdr)
			if status != tt.status || !strings.Contains(body, tt.body) {
				t.Errorf("got %d %q, want %d containing %q", status, body, tt.status, tt.body)
			}
			if status == 405 && hdr.Get("Allow") != "GET, PUT" {
				t.Errorf("got Allow %q, want %q", hdr.Get("Allow"), "GET, PUT")
			}
		})
	}
}

func TestMMDSGuestTokenExpires(t *testing.T) {
	t.Parallel()
	srv, _, clock := newMMDSTest(t, "V2")
	tok := token(t, srv, "2")
	if status, _, _ := mmdsDo(t, srv, "GET", "/latest", map[string]string{hdrToken: tok}); status != 200 {
		t.Fatalf("got %d with a fresh token, want 200", status)
	}
	clock.Advance(2 * time.Second)
	if status, _, body := mmdsDo(t, srv, "GET", "/latest", map[string]string{hdrToken: tok}); status != 401 {
		t.Errorf("got %d %q with an expired token, want 401", status, body)
	}
}

func TestMMDSGuestV1NeedsNoToken(t *testing.T) {
	t.Parallel()
	srv, _, _ := newMMDSTest(t, "V1")
	if status, _, body := mmdsDo(t, srv, "GET", "/latest/meta-data/ami-id", nil); status != 200 || body != "ami-1" {
		t.Errorf("got %d %q, want 200 ami-1", status, body)
	}
}

func TestMMDSGuestSeesUpdates(t *testing.T) {
	t.Parallel()
	srv, store, _ := newMMDSTest(t, "V2")
	tok := token(t, srv, "60")
	patch, _ := decodeAny([]byte(`{"latest": {"meta-data": {"ami-id": null, "new": "v"}}}`))
	if err := store.patch(patch); err != nil {
		t.Fatal(err)
	}
	_, _, body := mmdsDo(t, srv, "GET", "/latest/meta-data", map[string]string{hdrToken: tok, "Accept": "application/json"})
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["ami-id"]; ok || got["new"] != "v" {
		t.Errorf("got %v after the merge patch, want ami-id removed and new=v", got)
	}
}

func TestMMDSNoDataIsNotFound(t *testing.T) {
	t.Parallel()
	store := newMMDSStore(DefaultMMDSSizeLimit, nil)
	store.configure("V1", false)
	srv := httptest.NewServer(mmdsGuestHandler(store))
	t.Cleanup(srv.Close)
	// The agent retries on 404 until the host has written its data.
	if status, _, _ := mmdsDo(t, srv, "GET", "/latest/meta-data", map[string]string{"Accept": "application/json"}); status != 404 {
		t.Errorf("got %d before any PUT /mmds, want 404", status)
	}
}
