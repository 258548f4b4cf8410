package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kici-dev/kici/internal/api"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/orchestrator"
	"github.com/kici-dev/kici/internal/secrets"
)

// call sends one request with token as the bearer ("" for none) and body
// as JSON ("" for none).
func (h *harness) call(t *testing.T, token, method, path, body string) response {
	t.Helper()
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	var b []byte
	if body != "" {
		b = []byte(body)
		header.Set("Content-Type", "application/json")
	}
	return h.do(t, method, path, header, b)
}

// newAdminToken creates an admin token with the bootstrap token.
func (h *harness) newAdminToken(t *testing.T, name string, role auth.Role) apiv1.AdminToken {
	t.Helper()
	var tok apiv1.AdminToken
	h.mustAdmin(t, http.MethodPost, "/api/v1/tokens", apiv1.AdminTokenRequest{Name: name, Role: string(role)}, http.StatusCreated, &tok)
	return tok
}

// scalerConfig writes a scalers.yaml whose one bare-metal scaler never
// gets to spawn (no job asks for its labels), for the scaler routes.
func scalerConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scalers.yaml")
	cfg := `version: 1
scalers:
  - name: metal
    type: bare-metal
    maxAgents: 1
    labelSets:
      - labels: [never-requested]
        binaryPath: /nonexistent/kici-agent
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// fixture makes one request of a route succeed: the path (its wildcards
// filled), the body, and the status that means success. It runs once per
// caller, so a route that consumes what it acts on (delete, revoke) gets
// a fresh one each time.
type fixture func(t *testing.T) (path, body string, want int)

// TestEveryRouteEnforcesItsAccess walks every route the API serves (from
// api.Routes, the table the router is built from) with every role and
// with no token, and checks the answer against the route's declaration:
//
//   - public: success for everyone;
//   - signed, job-token and agent-token: 401 for no token and for every
//     admin token (admin tokens grant nothing there);
//   - join-token: the same answer whatever admin token is sent, none
//     included (the credential is the join token in the body);
//   - admin-token: 401 without a token, 403 for a role without the
//     route's permission, success for a role with it.
func TestEveryRouteEnforcesItsAccess(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, func(c *orchestrator.Config) {
		c.AgentAuth = "token"
		c.ScalerConfigPath = scalerConfig(t)
	}, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.mustAdmin(t, http.MethodPost, "/api/v1/sources", apiv1.Source{Name: "walk", Kind: "local", Path: dir, WebhookSecret: "walk-secret"}, http.StatusCreated, nil)
		run := h.trigger(t, "walk")[0].ID
		// A cancelled run: its event stream ends at once.
		done := h.trigger(t, "walk")[0].ID
		h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+done+"/cancel", nil, http.StatusOK, nil)
		// A source whose forks' pull requests await approval: each approve
		// call gets a fresh awaiting run.
		forkDir, forkBase, forkHead := forkRepo(t)
		h.addForkSource(t, "walk-fork", forkDir, "approve")

		// An accepted delivery, for the redeliver route.
		push := genericPush(sha)
		if resp := h.deliver(t, delivery{route: "generic", source: "walk", signature: sign("walk-secret", push), body: push}); resp.status != http.StatusOK {
			t.Fatalf("walk delivery: got %d %s, want 200", resp.status, resp.body)
		}
		var walkList apiv1.DeliveryList
		h.mustAdmin(t, http.MethodGet, "/api/v1/sources/walk/deliveries", nil, http.StatusOK, &walkList)
		if len(walkList.Deliveries) == 0 {
			t.Fatal("walk delivery: not listed")
		}
		walkDelivery := walkList.Deliveries[0].ID

		var seq atomic.Int64
		unique := func(prefix string) string { return fmt.Sprintf("%s%d", prefix, seq.Add(1)) }
		static := func(path, body string, want int) fixture {
			return func(*testing.T) (string, string, int) { return path, body, want }
		}
		fixtures := map[string]fixture{
			"GET /healthz":                    static("/healthz", "", http.StatusOK),
			"GET /readyz":                     static("/readyz", "", http.StatusOK),
			"GET /metrics":                    static("/metrics", "", http.StatusOK),
			"GET /ws":                         static("/ws", "", 0),
			"GET /ws/peer":                    static("/ws/peer", "", http.StatusNotFound),
			"POST /webhooks/github/{source}":  static("/webhooks/github/walk", `{}`, 0),
			"POST /webhooks/generic/{source}": static("/webhooks/generic/walk", `{}`, 0),
			"GET /api/v1/sources/{name}/archive/{sha}": static("/api/v1/sources/walk/archive/"+sha, "", 0),
			"GET /api/v1/sources":                      static("/api/v1/sources", "", http.StatusOK),
			"POST /api/v1/sources": func(t *testing.T) (string, string, int) {
				return "/api/v1/sources", fmt.Sprintf(`{"name": %q, "kind": "git", "url": "https://example.com/x.git"}`, unique("created-")), http.StatusCreated
			},
			"DELETE /api/v1/sources/{name}": func(t *testing.T) (string, string, int) {
				name := unique("doomed-")
				h.mustAdmin(t, http.MethodPost, "/api/v1/sources", apiv1.Source{Name: name, Kind: "git", URL: "https://example.com/x.git"}, http.StatusCreated, nil)
				return "/api/v1/sources/" + name, "", http.StatusNoContent
			},
			"POST /api/v1/sources/{name}/trigger":   static("/api/v1/sources/walk/trigger", `{"event": "push", "ref": "main"}`, http.StatusOK),
			"GET /api/v1/sources/{name}/deliveries": static("/api/v1/sources/walk/deliveries", "", http.StatusOK),
			"POST /api/v1/sources/{name}/deliveries/{id}/redeliver": func(t *testing.T) (string, string, int) {
				return "/api/v1/sources/walk/deliveries/" + walkDelivery + "/redeliver", "", http.StatusOK
			},
			"GET /api/v1/runs":      static("/api/v1/runs", "", http.StatusOK),
			"GET /api/v1/runs/{id}": static("/api/v1/runs/"+run, "", http.StatusOK),
			"POST /api/v1/runs/{id}/cancel": func(t *testing.T) (string, string, int) {
				return "/api/v1/runs/" + h.trigger(t, "walk")[0].ID + "/cancel", "", http.StatusOK
			},
			"POST /api/v1/runs/{id}/rerun": static("/api/v1/runs/"+done+"/rerun", "", http.StatusCreated),
			"POST /api/v1/runs/{id}/approve": func(t *testing.T) (string, string, int) {
				id := h.forkRunID(t, "walk-fork", unique("walk-pr-"), forkBase, forkHead)
				return "/api/v1/runs/" + id + "/approve", "", http.StatusOK
			},
			"GET /api/v1/runs/{id}/jobs/{job}/logs": static("/api/v1/runs/"+run+"/jobs/build/logs", "", http.StatusOK),
			"GET /api/v1/runs/{id}/events":          static("/api/v1/runs/"+done+"/events", "", http.StatusOK),
			"GET /api/v1/runs/{id}/artifacts":       static("/api/v1/runs/"+run+"/artifacts", "", http.StatusOK),
			// The job uploaded nothing: the guard let the caller through to 404.
			"GET /api/v1/runs/{id}/artifacts/{job}":      static("/api/v1/runs/"+run+"/artifacts/build", "", http.StatusNotFound),
			"PUT /api/v1/runs/{id}/jobs/{job}/artifacts": static("/api/v1/runs/"+run+"/jobs/build/artifacts", "bundle", 0),
			"GET /api/v1/runs/{id}/jobs/{job}/artifacts": static("/api/v1/runs/"+run+"/jobs/build/artifacts", "", 0),
			"GET /api/v1/caches":                         static("/api/v1/caches?key=k&version=0123456789abcdef", "", 0),
			"GET /api/v1/caches/{id}":                    static("/api/v1/caches/some-entry", "", 0),
			"PUT /api/v1/caches":                         static("/api/v1/caches?key=k&version=0123456789abcdef", "bundle", 0),
			"GET /api/v1/queue":                          static("/api/v1/queue", "", http.StatusOK),
			// The test orchestrator has no schedule lister yet: the handler's
			// own 503 shows the guard let the caller through. (200 once the
			// orchestrator wires its scheduler's cache into api.Config.)
			"GET /api/v1/schedules": static("/api/v1/schedules", "", http.StatusOK),
			"GET /api/v1/agents":    static("/api/v1/agents", "", http.StatusOK),
			"GET /api/v1/peers":     static("/api/v1/peers", "", http.StatusOK),
			// A peer no one knows: the guard let the caller through to 404.
			"DELETE /api/v1/peers/{id}": static("/api/v1/peers/no-such-peer", "", http.StatusNotFound),
			// Standalone: no workers to revoke (the handler's 409).
			"POST /api/v1/peers/{id}/revoke": static("/api/v1/peers/some-worker/revoke", "", http.StatusConflict),
			// The walk runs standalone orchestrators, which are not
			// coordinators: the join routes' own 409 (404 for the public CA)
			// shows the guard let the caller through. cluster_test.go walks
			// them on a coordinator.
			"POST /api/v1/peers/join-tokens":        static("/api/v1/peers/join-tokens", `{"ttl": "1h"}`, http.StatusConflict),
			"GET /api/v1/peers/join-tokens":         static("/api/v1/peers/join-tokens", "", http.StatusConflict),
			"DELETE /api/v1/peers/join-tokens/{id}": static("/api/v1/peers/join-tokens/no-such-token", "", http.StatusConflict),
			"GET /api/v1/cluster/ca":                static("/api/v1/cluster/ca", "", http.StatusNotFound),
			"POST /api/v1/cluster/join": static("/api/v1/cluster/join",
				`{"token_id": "aaaaaaaaaaaa", "secret": "00", "node_id": "walker", "csr_pem": "x"}`, http.StatusConflict),
			"POST /api/v1/agents/{id}/drain": func(t *testing.T) (string, string, int) {
				return "/api/v1/agents/" + unique("host-") + "/drain", `{"reason": "walk"}`, http.StatusOK
			},
			"DELETE /api/v1/agents/{id}/drain": func(t *testing.T) (string, string, int) {
				id := unique("host-")
				h.mustAdmin(t, http.MethodPost, "/api/v1/agents/"+id+"/drain", `{}`, http.StatusOK, nil)
				return "/api/v1/agents/" + id + "/drain", "", http.StatusNoContent
			},
			"POST /api/v1/agent-tokens": static("/api/v1/agent-tokens", `{"labels": ["linux"]}`, http.StatusCreated),
			"GET /api/v1/agent-tokens":  static("/api/v1/agent-tokens", "", http.StatusOK),
			"DELETE /api/v1/agent-tokens/{id}": func(t *testing.T) (string, string, int) {
				var tok apiv1.AgentToken
				h.mustAdmin(t, http.MethodPost, "/api/v1/agent-tokens", `{"labels": ["linux"]}`, http.StatusCreated, &tok)
				return "/api/v1/agent-tokens/" + tok.ID, "", http.StatusOK
			},
			"POST /api/v1/tokens": func(t *testing.T) (string, string, int) {
				return "/api/v1/tokens", fmt.Sprintf(`{"name": %q, "role": "auditor"}`, unique("made-")), http.StatusCreated
			},
			"GET /api/v1/tokens": static("/api/v1/tokens", "", http.StatusOK),
			"DELETE /api/v1/tokens/{id}": func(t *testing.T) (string, string, int) {
				tok := h.newAdminToken(t, unique("doomed-"), auth.Auditor)
				return "/api/v1/tokens/" + tok.ID, "", http.StatusOK
			},
			"GET /api/v1/secrets": static("/api/v1/secrets", "", http.StatusOK),
			"PUT /api/v1/secrets/{name}": func(t *testing.T) (string, string, int) {
				return "/api/v1/secrets/" + unique("NEW_"), `{"value": "v123"}`, http.StatusCreated
			},
			"DELETE /api/v1/secrets/{name}": func(t *testing.T) (string, string, int) {
				name := unique("DOOMED_")
				h.mustAdmin(t, http.MethodPut, "/api/v1/secrets/"+name, `{"value": "v123"}`, http.StatusCreated, nil)
				return "/api/v1/secrets/" + name, "", http.StatusOK
			},
			"GET /api/v1/environments": static("/api/v1/environments", "", http.StatusOK),
			"PUT /api/v1/environments/{name}": func(t *testing.T) (string, string, int) {
				return "/api/v1/environments/" + unique("env-"), `{"require_approval": true, "branches": ["main"]}`, http.StatusOK
			},
			"DELETE /api/v1/environments/{name}": func(t *testing.T) (string, string, int) {
				name := unique("doomed-env-")
				h.mustAdmin(t, http.MethodPut, "/api/v1/environments/"+name, `{"branches": []}`, http.StatusOK, nil)
				return "/api/v1/environments/" + name, "", http.StatusOK
			},
			"POST /api/v1/secrets/rotate-key": func(t *testing.T) (string, string, int) {
				return "/api/v1/secrets/rotate-key", fmt.Sprintf(`{"new_key": %q}`, secrets.GenerateKey().Hex()), http.StatusOK
			},
			"GET /api/v1/audit":           static("/api/v1/audit", "", http.StatusOK),
			"GET /api/v1/scalers":         static("/api/v1/scalers", "", http.StatusOK),
			"POST /api/v1/scalers/reload": static("/api/v1/scalers/reload", "", http.StatusOK),
			// An unknown scaler is answered 404: the guard let the caller
			// through.
			"POST /api/v1/scalers/{name}/retry": static("/api/v1/scalers/no-such-scaler/retry", "", http.StatusNotFound),
			"GET /api/v1/scalers/orphans":       static("/api/v1/scalers/orphans", "", http.StatusOK),
			// An id with no compute is answered 200 with its outcome
			// (not-found): the guard let the caller through.
			"GET /api/v1/diagnose":              static("/api/v1/diagnose", "", http.StatusOK),
			"POST /api/v1/scalers/orphans/stop": static("/api/v1/scalers/orphans/stop", `{"ids": ["scaler-bare-metal-none"]}`, http.StatusOK),
		}

		routes := api.Routes()
		seen := map[string]bool{}
		for _, rt := range routes {
			seen[rt.Pattern] = true
			if _, ok := fixtures[rt.Pattern]; !ok {
				t.Errorf("route %q has no fixture in this test: add one, so its access is checked", rt.Pattern)
			}
		}
		for p := range fixtures {
			if !seen[p] {
				t.Errorf("fixture %q names no route the API serves", p)
			}
		}

		type caller struct {
			name  string
			token string
			role  auth.Role // "" for no token
		}
		callers := []caller{{name: "no token"}}
		for _, role := range auth.Roles {
			tok := h.newAdminToken(t, "walker "+string(role), role)
			callers = append(callers, caller{name: string(role), token: tok.Token, role: role})
		}
		t.Run("routes", func(t *testing.T) {
			for _, rt := range routes {
				fx := fixtures[rt.Pattern]
				if fx == nil {
					continue
				}
				method, _, _ := strings.Cut(rt.Pattern, " ")
				for _, c := range callers {
					t.Run(rt.Pattern+"/"+c.name, func(t *testing.T) {
						t.Parallel()
						path, body, ok := fx(t)
						want := ok
						switch {
						case rt.Access == "public", rt.Access == "join-token":
						case rt.Access != "admin-token":
							want = http.StatusUnauthorized
						case c.role == "":
							want = http.StatusUnauthorized
						case !c.role.Can(rt.Permission):
							want = http.StatusForbidden
						}
						resp := h.call(t, c.token, method, path, body)
						if resp.status != want {
							t.Fatalf("%s %s as %s (access %s, permission %q): got status %d (%.300s), want %d",
								method, path, c.name, rt.Access, rt.Permission, resp.status, resp.body, want)
						}
						if want == http.StatusForbidden {
							wantMsg := fmt.Sprintf("role %q does not have permission %q", c.role, rt.Permission)
							if got := resp.apiError(t).Error; got != wantMsg {
								t.Errorf("got error %q, want %q", got, wantMsg)
							}
						}
					})
				}
			}
		})

		// Every denial is in the audit log: one entry per route and caller
		// refused by the guard.
		var wantDenied int
		for _, rt := range routes {
			for _, c := range callers {
				if rt.Access == "admin-token" && (c.role == "" || !c.role.Can(rt.Permission)) {
					wantDenied++
				}
			}
		}
		var got apiv1.AuditList
		h.mustAdmin(t, http.MethodGet, "/api/v1/audit?outcome=denied&limit=1000", nil, http.StatusOK, &got)
		denied := 0
		for _, e := range got.Entries {
			if e.Status == http.StatusForbidden || (e.Status == http.StatusUnauthorized && strings.HasPrefix(e.Target, "/api/v1/") && e.ActorType != auth.ActorJobToken) {
				denied++
			}
		}
		if denied != wantDenied {
			data, _ := json.MarshalIndent(got.Entries, "", "  ")
			t.Errorf("denied admin-token requests in the audit log: got %d, want %d\n%s", denied, wantDenied, data)
		}
	})
}
