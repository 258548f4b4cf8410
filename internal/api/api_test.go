package api_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
)

// adminRoutes are routes that need an admin token, with a body that would
// be valid for each, to try malformed Authorization headers on
// (TestEveryRouteEnforcesItsAccess walks every route with every role).
var adminRoutes = []struct {
	method, path, body string
}{
	{http.MethodGet, "/api/v1/sources", ""},
	{http.MethodPost, "/api/v1/sources", `{"name": "x", "kind": "git", "url": "https://example.com/x.git"}`},
	{http.MethodDelete, "/api/v1/sources/x", ""},
	{http.MethodPost, "/api/v1/sources/x/trigger", `{"event": "push"}`},
	{http.MethodGet, "/api/v1/runs", ""},
	{http.MethodGet, "/api/v1/runs/r1", ""},
	{http.MethodPost, "/api/v1/runs/r1/cancel", `{"force": true}`},
	{http.MethodPost, "/api/v1/runs/r1/rerun", ""},
	{http.MethodGet, "/api/v1/runs/r1/jobs/build/logs", ""},
	{http.MethodGet, "/api/v1/runs/r1/events", ""},
	{http.MethodGet, "/api/v1/queue", ""},
	{http.MethodGet, "/api/v1/agents", ""},
	{http.MethodPost, "/api/v1/agent-tokens", `{"labels": ["linux"]}`},
}

func TestAdminRoutesNeedToken(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		auths := []struct {
			name   string
			header string // Authorization; "" for none
		}{
			{name: "no token", header: ""},
			{name: "wrong token", header: "Bearer not-the-token"},
			{name: "token with a suffix", header: "Bearer " + adminToken + "x"},
			{name: "token prefix", header: "Bearer " + adminToken[:len(adminToken)-1]},
			{name: "empty bearer", header: "Bearer "},
			{name: "no scheme", header: adminToken},
			{name: "basic scheme", header: "Basic " + adminToken},
		}
		// The group returns once its parallel subtests are done.
		t.Run("routes", func(t *testing.T) {
			for _, rt := range adminRoutes {
				for _, a := range auths {
					t.Run(rt.method+" "+rt.path+"/"+a.name, func(t *testing.T) {
						t.Parallel()
						header := http.Header{}
						if a.header != "" {
							header.Set("Authorization", a.header)
						}
						var body []byte
						if rt.body != "" {
							body = []byte(rt.body)
							header.Set("Content-Type", "application/json")
						}
						resp := h.do(t, rt.method, rt.path, header, body)
						if resp.status != http.StatusUnauthorized {
							t.Fatalf("got status %d (%s), want 401", resp.status, resp.body)
						}
						if got := resp.apiError(t).Error; !strings.Contains(got, "admin token missing or invalid") {
							t.Errorf("got error %q, want it to say the admin token is missing or invalid", got)
						}
					})
				}
			}
		})
		// Nothing an unauthenticated request sent was acted on.
		var sources apiv1.SourceList
		h.mustAdmin(t, http.MethodGet, "/api/v1/sources", nil, http.StatusOK, &sources)
		if len(sources.Sources) != 0 {
			t.Errorf("got sources %v after unauthenticated requests, want none", sources.Sources)
		}
	})
}

// TestAdminTokenSchemeCaseInsensitive: the auth scheme is case-insensitive
// (RFC 9110, section 11.1).
func TestAdminTokenSchemeCaseInsensitive(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
			resp := h.do(t, http.MethodGet, "/api/v1/sources", http.Header{"Authorization": {scheme + " " + adminToken}}, nil)
			if resp.status != http.StatusOK {
				t.Errorf("scheme %q: got status %d (%s), want 200", scheme, resp.status, resp.body)
			}
		}
	})
}

func TestHealth(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		tests := []struct {
			path       string
			wantStatus string
		}{
			{path: "/healthz", wantStatus: "ok"},
			{path: "/readyz", wantStatus: "ready"},
		}
		for _, tt := range tests {
			t.Run(tt.path, func(t *testing.T) {
				t.Parallel()
				resp := h.do(t, http.MethodGet, tt.path, nil, nil)
				if resp.status != http.StatusOK {
					t.Fatalf("got status %d (%s), want 200", resp.status, resp.body)
				}
				var got struct {
					Status string `json:"status"`
				}
				resp.decode(t, &got)
				if got.Status != tt.wantStatus {
					t.Errorf("got status %q, want %q", got.Status, tt.wantStatus)
				}
			})
		}
	})
}

// TestRequestBodies covers what every JSON body of the API goes through:
// the 1 MiB bound and strict decoding.
func TestRequestBodies(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "bodies", dir, "")
		var queued apiv1.TriggerResponse
		h.mustAdmin(t, http.MethodPost, "/api/v1/sources/bodies/trigger", `{"event": "push"}`, http.StatusOK, &queued)
		runID := queued.Runs[0].ID

		big := append([]byte(`{"name": "big", "kind": "git", "url": "`), bytes.Repeat([]byte("a"), 1<<20)...)
		big = append(big, `"}`...)
		padded := append([]byte(`{"event": "push"}`), bytes.Repeat([]byte(" "), 1<<20)...)
		tests := []struct {
			name       string
			method     string
			path       string
			body       string
			wantStatus int
			wantError  string
		}{
			{
				name: "source over 1 MiB", method: http.MethodPost, path: "/api/v1/sources", body: string(big),
				wantStatus: http.StatusRequestEntityTooLarge, wantError: "request body over 1048576 bytes",
			},
			{
				name: "trigger padded over 1 MiB", method: http.MethodPost, path: "/api/v1/sources/bodies/trigger", body: string(padded),
				wantStatus: http.StatusRequestEntityTooLarge, wantError: "request body over 1048576 bytes",
			},
			{
				name: "agent token over 1 MiB", method: http.MethodPost, path: "/api/v1/agent-tokens",
				body:       `{"labels": ["` + strings.Repeat("l", 1<<20) + `"]}`,
				wantStatus: http.StatusRequestEntityTooLarge, wantError: "request body over 1048576 bytes",
			},
			{
				name: "cancel over 1 MiB", method: http.MethodPost, path: "/api/v1/runs/" + runID + "/cancel",
				body:       `{"force": true` + strings.Repeat(" ", 1<<20) + `}`,
				wantStatus: http.StatusRequestEntityTooLarge, wantError: "request body over 1048576 bytes",
			},
			{
				name: "unknown field in a source", method: http.MethodPost, path: "/api/v1/sources",
				body:       `{"name": "x", "kind": "git", "url": "https://example.com/x.git", "branch": "main"}`,
				wantStatus: http.StatusBadRequest, wantError: `invalid JSON body: json: unknown field "branch"`,
			},
			{
				name: "unknown field in a trigger", method: http.MethodPost, path: "/api/v1/sources/bodies/trigger",
				body:       `{"event": "push", "commit": "abc"}`,
				wantStatus: http.StatusBadRequest, wantError: `invalid JSON body: json: unknown field "commit"`,
			},
			{
				name: "unknown field in a cancel", method: http.MethodPost, path: "/api/v1/runs/" + runID + "/cancel",
				body:       `{"forced": true}`,
				wantStatus: http.StatusBadRequest, wantError: `invalid JSON body: json: unknown field "forced"`,
			},
			{
				name: "unknown field in an agent token", method: http.MethodPost, path: "/api/v1/agent-tokens",
				body:       `{"labels": [], "name": "x"}`,
				wantStatus: http.StatusBadRequest, wantError: `invalid JSON body: json: unknown field "name"`,
			},
			{
				name: "wrong type", method: http.MethodPost, path: "/api/v1/sources/bodies/trigger",
				body:       `{"event": 1}`,
				wantStatus: http.StatusBadRequest, wantError: "invalid JSON body: json: cannot unmarshal number",
			},
			{
				name: "not json", method: http.MethodPost, path: "/api/v1/sources",
				body:       `name=x`,
				wantStatus: http.StatusBadRequest, wantError: "invalid JSON body: invalid character",
			},
			{
				name: "empty body", method: http.MethodPost, path: "/api/v1/sources",
				body:       ``,
				wantStatus: http.StatusBadRequest, wantError: "invalid JSON body: ",
			},
			{
				name: "two values", method: http.MethodPost, path: "/api/v1/sources",
				body:       `{"name": "two", "kind": "git", "url": "https://example.com/x.git"} {"name": "three"}`,
				wantStatus: http.StatusBadRequest, wantError: "invalid JSON body: ",
			},
			{
				name: "trailing garbage", method: http.MethodPost, path: "/api/v1/sources/bodies/trigger",
				body:       `{"event": "push"}]`,
				wantStatus: http.StatusBadRequest, wantError: "invalid JSON body: ",
			},
		}
		// The group returns once its parallel subtests are done.
		t.Run("cases", func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					resp := h.admin(t, tt.method, tt.path, []byte(tt.body))
					if resp.status != tt.wantStatus {
						t.Fatalf("got status %d (%.300s), want %d", resp.status, resp.body, tt.wantStatus)
					}
					if got := resp.apiError(t).Error; !strings.HasPrefix(got, tt.wantError) {
						t.Errorf("got error %q, want it to start with %q", got, tt.wantError)
					}
				})
			}
		})
		t.Run("nothing was created", func(t *testing.T) {
			var got apiv1.SourceList
			h.mustAdmin(t, http.MethodGet, "/api/v1/sources", nil, http.StatusOK, &got)
			var names []string
			for _, s := range got.Sources {
				names = append(names, s.Name)
			}
			if diff := cmp.Diff([]string{"bodies"}, names); diff != "" {
				t.Errorf("sources mismatch (-want +got):\n%s", diff)
			}
		})
	})
}
