package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/orchestrator"
	"github.com/kici-dev/kici/internal/protocol"
)

func TestAdminTokensAPI(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		created := h.newAdminToken(t, "alice", auth.Admin)
		if !strings.HasPrefix(created.Token, "kadm_") || created.Prefix != created.Token[:12] || created.CreatedBy != "bootstrap" || created.Role != "admin" {
			t.Errorf("created %+v: want a kadm_ token, its prefix, role admin, created by bootstrap", created)
		}
		// The token works, and its use is recorded.
		if resp := h.call(t, created.Token, http.MethodGet, "/api/v1/runs", ""); resp.status != http.StatusOK {
			t.Fatalf("use the new token: got status %d (%s), want 200", resp.status, resp.body)
		}
		// An admin may not manage tokens; the owner may.
		if resp := h.call(t, created.Token, http.MethodPost, "/api/v1/tokens", `{"name": "x", "role": "owner"}`); resp.status != http.StatusForbidden {
			t.Errorf("admin creates a token: got status %d, want 403", resp.status)
		}
		owner := h.newAdminToken(t, "root", auth.Owner)
		var byOwner apiv1.AdminToken
		resp := h.call(t, owner.Token, http.MethodPost, "/api/v1/tokens", `{"name": "ci", "role": "auditor", "expires_in": "30d"}`)
		if resp.status != http.StatusCreated {
			t.Fatalf("owner creates a token: got status %d (%s), want 201", resp.status, resp.body)
		}
		resp.decode(t, &byOwner)
		if byOwner.CreatedBy != owner.ID || byOwner.ExpiresAt == nil {
			t.Errorf("created by owner: got %+v, want created_by %s and an expiry", byOwner, owner.ID)
		}

		var list apiv1.AdminTokenList
		h.mustAdmin(t, http.MethodGet, "/api/v1/tokens", nil, http.StatusOK, &list)
		raw := h.admin(t, http.MethodGet, "/api/v1/tokens", nil).body
		for _, secret := range []string{created.Token, owner.Token, byOwner.Token} {
			if strings.Contains(string(raw), secret) || strings.Contains(string(raw), auth.HashToken(secret)) {
				t.Errorf("token list shows a token or its hash: %s", raw)
			}
		}
		var names []string
		for _, tok := range list.Tokens {
			names = append(names, tok.Name+"/"+tok.Role)
			if tok.ID == created.ID && tok.LastUsedAt == nil {
				t.Errorf("alice's token: got no last use, want one")
			}
		}
		if diff := cmp.Diff([]string{"alice/admin", "root/owner", "ci/auditor"}, names); diff != "" {
			t.Errorf("tokens (-want +got):\n%s", diff)
		}

		tests := []struct {
			name       string
			body       string
			wantStatus int
			wantError  string
		}{
			{name: "unknown role", body: `{"name": "x", "role": "root"}`, wantStatus: http.StatusBadRequest, wantError: `role "root": want owner, admin or auditor`},
			{name: "no name", body: `{"role": "admin"}`, wantStatus: http.StatusBadRequest, wantError: "name: required"},
			{name: "bad expiry", body: `{"name": "x", "role": "admin", "expires_in": "soon"}`, wantStatus: http.StatusBadRequest, wantError: `expires_in "soon"`},
			{name: "negative expiry", body: `{"name": "x", "role": "admin", "expires_in": "-1h"}`, wantStatus: http.StatusBadRequest, wantError: `expires_in "-1h"`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				resp := h.admin(t, http.MethodPost, "/api/v1/tokens", tt.body)
				if resp.status != tt.wantStatus || !strings.Contains(resp.apiError(t).Error, tt.wantError) {
					t.Errorf("got %d %s, want %d saying %q", resp.status, resp.body, tt.wantStatus, tt.wantError)
				}
			})
		}

		// Revoked: refused at once, like an unknown token; a second revoke is 404.
		h.mustAdmin(t, http.MethodDelete, "/api/v1/tokens/"+created.ID, nil, http.StatusOK, nil)
		if resp := h.call(t, created.Token, http.MethodGet, "/api/v1/runs", ""); resp.status != http.StatusUnauthorized {
			t.Errorf("revoked token: got status %d, want 401", resp.status)
		}
		h.mustAdmin(t, http.MethodDelete, "/api/v1/tokens/"+created.ID, nil, http.StatusNotFound, nil)
		h.mustAdmin(t, http.MethodDelete, "/api/v1/tokens/no-such-token", nil, http.StatusNotFound, nil)

		// Every mutation above is in the audit log, with its actor.
		var audit apiv1.AuditList
		h.mustAdmin(t, http.MethodGet, "/api/v1/audit?action=token.", nil, http.StatusOK, &audit)
		var got []string
		for _, e := range audit.Entries {
			got = append(got, e.Action+" "+e.Outcome+" by "+e.ActorName)
		}
		want := []string{
			"token.revoke failed by bootstrap",
			"token.revoke failed by bootstrap",
			"token.revoke allowed by bootstrap",
			"token.create failed by bootstrap",
			"token.create failed by bootstrap",
			"token.create failed by bootstrap",
			"token.create failed by bootstrap",
			"token.create allowed by root",
			"token.create allowed by bootstrap",
			"token.create denied by alice",
			"token.create allowed by bootstrap",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("audit entries, newest first (-want +got):\n%s", diff)
		}
		for _, e := range audit.Entries {
			for _, secret := range []string{created.Token, owner.Token, byOwner.Token} {
				if strings.Contains(e.Detail, secret) || strings.Contains(e.Target, secret) {
					t.Errorf("audit entry %+v holds a token", e)
				}
			}
		}
	})
}

// dialAgent connects to /ws with token and registers with labels. It
// returns the connection, or the close status when the orchestrator
// refused the agent.
func dialAgent(t *testing.T, h *harness, token, id string, labels []string) (*websocket.Conn, websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(h.base, "http") + "/ws"
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return nil, websocket.StatusCode(status), err.Error()
	}
	data, err := protocol.Encode(&protocol.Register{AgentID: id, Labels: labels, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageText, data); err != nil {
		t.Fatal(err)
	}
	_, reply, err := c.Read(ctx)
	if err != nil {
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return nil, ce.Code, ce.Reason
		}
		t.Fatalf("read registered: %v", err)
	}
	m, err := protocol.Decode(reply)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(*protocol.Registered); !ok {
		t.Fatalf("got %s, want registered", m.Type())
	}
	t.Cleanup(func() { c.CloseNow() })
	return c, 0, ""
}

// closeStatus reads from c until the orchestrator closes it, and returns
// the close code and reason.
func closeStatus(t *testing.T, c *websocket.Conn) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue // heartbeats
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Reason
		}
		t.Fatalf("read: got %v, want a close frame", err)
	}
}

func TestAgentTokensScopeAndRevocation(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, func(c *orchestrator.Config) { c.AgentAuth = "token" }, func(t *testing.T, h *harness) {
		var tok apiv1.AgentToken
		h.mustAdmin(t, http.MethodPost, "/api/v1/agent-tokens", `{"labels": ["linux", "docker"]}`, http.StatusCreated, &tok)

		t.Run("a label outside the token's scope is refused with 4003", func(t *testing.T) {
			c, code, reason := dialAgent(t, h, tok.Token, "rogue", []string{"linux", "gpu", "kici:os:linux"})
			if c != nil || code != protocol.CloseLabelsNotAllowed || !strings.Contains(reason, `label "gpu" is not allowed by this agent token`) {
				t.Fatalf("got close %d %q, want %d naming gpu", code, reason, protocol.CloseLabelsNotAllowed)
			}
			var audit apiv1.AuditList
			h.mustAdmin(t, http.MethodGet, "/api/v1/audit?action=agent.register", nil, http.StatusOK, &audit)
			if len(audit.Entries) != 1 || audit.Entries[0].Outcome != "denied" || audit.Entries[0].ActorID != tok.ID ||
				!strings.Contains(audit.Entries[0].Detail, "4003") {
				t.Errorf("audit: got %+v, want one denied agent.register by the token, close 4003", audit.Entries)
			}
		})
		t.Run("bad tokens are refused before the upgrade", func(t *testing.T) {
			for _, bad := range []string{"", "kat_" + strings.Repeat("0", 64), adminToken} {
				if c, code, _ := dialAgent(t, h, bad, "nobody", nil); c != nil || code != http.StatusUnauthorized {
					t.Errorf("token %q: got status %d, want 401", bad, code)
				}
			}
		})

		// Two agents on the token, one on another: revoking the token
		// disconnects exactly its two, with 4010.
		a1, _, _ := dialAgent(t, h, tok.Token, "agent-1", []string{"linux", "kici:os:linux", "kici:arch:amd64"})
		a2, _, _ := dialAgent(t, h, tok.Token, "agent-2", []string{"docker"})
		var other apiv1.AgentToken
		h.mustAdmin(t, http.MethodPost, "/api/v1/agent-tokens", `{"labels": ["linux"]}`, http.StatusCreated, &other)
		a3, _, _ := dialAgent(t, h, other.Token, "agent-3", []string{"linux"})
		if a1 == nil || a2 == nil || a3 == nil {
			t.Fatal("an agent within its token's scope was refused")
		}
		var list apiv1.AgentTokenList
		h.mustAdmin(t, http.MethodGet, "/api/v1/agent-tokens", nil, http.StatusOK, &list)
		connected := map[string]int{}
		for _, tk := range list.Tokens {
			connected[tk.ID] = tk.Agents
			if tk.CreatedBy != "bootstrap" || tk.LastUsedAt == nil {
				t.Errorf("token %s: got created_by %q, last used %v; want bootstrap and a last use", tk.ID, tk.CreatedBy, tk.LastUsedAt)
			}
		}
		if connected[tok.ID] != 2 || connected[other.ID] != 1 {
			t.Errorf("connected agents per token: got %v, want 2 and 1", connected)
		}
		if strings.Contains(string(h.admin(t, http.MethodGet, "/api/v1/agent-tokens", nil).body), tok.Token) {
			t.Error("the agent token list shows a token")
		}

		var revoked apiv1.AgentTokenRevoked
		h.mustAdmin(t, http.MethodDelete, "/api/v1/agent-tokens/"+tok.ID, nil, http.StatusOK, &revoked)
		if revoked.Disconnected != 2 {
			t.Errorf("disconnected: got %d, want 2", revoked.Disconnected)
		}
		for _, c := range []*websocket.Conn{a1, a2} {
			if code, reason := closeStatus(t, c); code != protocol.CloseTokenRevoked {
				t.Errorf("revoked agent: got close %d %q, want %d", code, reason, protocol.CloseTokenRevoked)
			}
		}
		h.mustAdmin(t, http.MethodDelete, "/api/v1/agent-tokens/"+tok.ID, nil, http.StatusNotFound, nil)
		if c, code, _ := dialAgent(t, h, tok.Token, "agent-1", []string{"linux"}); c != nil || code != http.StatusUnauthorized {
			t.Errorf("reconnect with the revoked token: got %d, want 401", code)
		}
		// The other agent is still there.
		var agents apiv1.AgentList
		h.mustAdmin(t, http.MethodGet, "/api/v1/agents", nil, http.StatusOK, &agents)
		waitUntil(t, "the revoked agents to be gone", func() bool {
			h.mustAdmin(t, http.MethodGet, "/api/v1/agents", nil, http.StatusOK, &agents)
			return len(agents.Agents) == 1 && agents.Agents[0].ID == "agent-3"
		})
	})
}

// TestAgentTokenExpiry: an expired token is refused, and a connected
// agent is disconnected with 4010 when its token expires.
func TestAgentTokenExpiry(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, func(c *orchestrator.Config) { c.AgentAuth = "token" }, func(t *testing.T, h *harness) {
		var tok apiv1.AgentToken
		h.mustAdmin(t, http.MethodPost, "/api/v1/agent-tokens", `{"labels": ["linux"], "expires_in": "1500ms"}`, http.StatusCreated, &tok)
		if tok.ExpiresAt == nil {
			t.Fatal("got no expiry, want one")
		}
		c, _, _ := dialAgent(t, h, tok.Token, "short-lived", []string{"linux"})
		if c == nil {
			t.Fatal("agent refused before its token expired")
		}
		if code, reason := closeStatus(t, c); code != protocol.CloseTokenRevoked || reason != "agent token expired" {
			t.Errorf("got close %d %q, want %d agent token expired", code, reason, protocol.CloseTokenRevoked)
		}
		if c, code, _ := dialAgent(t, h, tok.Token, "short-lived", []string{"linux"}); c != nil || code != http.StatusUnauthorized {
			t.Errorf("dial with the expired token: got %d, want 401", code)
		}
	})
}

// TestFailedAuthenticationsAreLimited: a client address may make
// KICI_AUTH_FAILURE_LIMIT failed authentications (default 20, as the docs
// say), and then gets 429 with Retry-After on every authenticated route,
// even with a valid token; public routes stay open.
func TestFailedAuthenticationsAreLimited(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, func(c *orchestrator.Config) { c.AuthFailureLimit = 0 }, func(t *testing.T, h *harness) {
		for i := range orchestrator.DefaultAuthFailureLimit - 1 {
			if resp := h.call(t, "kadm_guess", http.MethodGet, "/api/v1/runs", ""); resp.status != http.StatusUnauthorized {
				t.Fatalf("failure %d: got %d, want 401", i+1, resp.status)
			}
		}
		// The twentieth failure, the last one allowed, blocks the address.
		if resp := h.call(t, "", http.MethodGet, "/api/v1/runs", ""); resp.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: got %d, want 401", orchestrator.DefaultAuthFailureLimit, resp.status)
		}
		for _, tt := range []struct{ token, path string }{
			{"kadm_guess", "/api/v1/runs"},
			{adminToken, "/api/v1/runs"},
			{"", "/ws"},
			{"kjt_x", "/api/v1/sources/x/archive/" + strings.Repeat("a", 40)},
		} {
			resp := h.call(t, tt.token, http.MethodGet, tt.path, "")
			if resp.status != http.StatusTooManyRequests || resp.header.Get("Retry-After") == "" {
				t.Errorf("%s while blocked: got %d (Retry-After %q), want 429 with Retry-After", tt.path, resp.status, resp.header.Get("Retry-After"))
			}
		}
		if resp := h.call(t, "", http.MethodGet, "/healthz", ""); resp.status != http.StatusOK {
			t.Errorf("public route while blocked: got %d, want 200", resp.status)
		}
	})
}

// TestFailedAuthenticationsBehindAProxy: behind a trusted reverse proxy
// the limit counts the client named by X-Forwarded-For, so one client's
// failures do not block every other client of the proxy; without the
// proxy trusted, the header is ignored and the proxy's address is blocked.
func TestFailedAuthenticationsBehindAProxy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		trusted       string
		wantNeighbour int
	}{
		{name: "trusted proxy", trusted: "127.0.0.1", wantNeighbour: http.StatusOK},
		{name: "untrusted proxy", trusted: "", wantNeighbour: http.StatusTooManyRequests},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := startServerWith(t, "", func(c *orchestrator.Config) {
				c.AuthFailureLimit = 2
				if tt.trusted != "" {
					c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(tt.trusted + "/32")}
				}
			})
			from := func(client, token string) int {
				hdr := http.Header{"X-Forwarded-For": {client}, "Authorization": {"Bearer " + token}}
				return h.do(t, http.MethodGet, "/api/v1/runs", hdr, nil).status
			}
			for i := range 2 {
				if got := from("203.0.113.7", "kadm_guess"); got != http.StatusUnauthorized {
					t.Fatalf("failure %d: got %d, want 401", i+1, got)
				}
			}
			if got := from("203.0.113.7", adminToken); got != http.StatusTooManyRequests {
				t.Errorf("the failing client with a valid token: got %d, want 429", got)
			}
			if got := from("203.0.113.8", adminToken); got != tt.wantNeighbour {
				t.Errorf("another client of the proxy with a valid token: got %d, want %d", got, tt.wantNeighbour)
			}
		})
	}
}

// TestAuditLog: mutations (allowed, failed) and denied requests of every
// kind are in the audit log, and an auditor can read it.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "audited", dir, "hook-secret")
		auditor := h.newAdminToken(t, "eve", auth.Auditor)
		h.call(t, auditor.Token, http.MethodPut, "/api/v1/secrets/X", `{"value": "v"}`)
		h.call(t, "kadm_nope", http.MethodGet, "/api/v1/sources", "")
		h.call(t, "", http.MethodPost, "/webhooks/github/audited", `{}`)
		h.mustAdmin(t, http.MethodDelete, "/api/v1/sources/missing", nil, http.StatusNotFound, nil)
		h.mustAdmin(t, http.MethodDelete, "/api/v1/sources/audited", nil, http.StatusNoContent, nil)

		var list apiv1.AuditList
		resp := h.call(t, auditor.Token, http.MethodGet, "/api/v1/audit", "")
		if resp.status != http.StatusOK {
			t.Fatalf("auditor reads the audit log: got %d, want 200", resp.status)
		}
		resp.decode(t, &list)
		type row struct{ Actor, Action, Target, Outcome string }
		var got []row
		for _, e := range list.Entries {
			got = append(got, row{e.ActorType + ":" + e.ActorName, e.Action, e.Target, e.Outcome})
			if e.ClientAddr != "127.0.0.1" || e.Time.IsZero() {
				t.Errorf("entry %+v: want client 127.0.0.1 and a time", e)
			}
		}
		want := []row{
			{"bootstrap:bootstrap", "source.delete", "source:audited", "allowed"},
			{"bootstrap:bootstrap", "source.delete", "source:missing", "failed"},
			{"anonymous:", "webhook.github", "/webhooks/github/audited", "denied"},
			{"anonymous:", "source.list", "/api/v1/sources", "denied"},
			{"admin_token:eve", "secret.set", "/api/v1/secrets/X", "denied"},
			{"bootstrap:bootstrap", "token.create", "", "allowed"},
			{"bootstrap:bootstrap", "source.create", "source:audited", "allowed"},
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b row) bool {
			return a.Actor == b.Actor && a.Action == b.Action && a.Outcome == b.Outcome && (a.Target == "" || b.Target == "" || a.Target == b.Target)
		})); diff != "" {
			t.Errorf("audit log, newest first (-want +got):\n%s", diff)
		}
		for _, tt := range []struct{ query, want string }{
			{"limit=0", "limit"}, {"since=yesterday", "since"}, {"outcome=maybe", "outcome"},
		} {
			if resp := h.admin(t, http.MethodGet, "/api/v1/audit?"+tt.query, nil); resp.status != http.StatusBadRequest {
				t.Errorf("%s: got %d, want 400", tt.query, resp.status)
			}
		}
		var page apiv1.AuditList
		h.mustAdmin(t, http.MethodGet, "/api/v1/audit?limit=2", nil, http.StatusOK, &page)
		if len(page.Entries) != 2 || page.Next == "" {
			t.Fatalf("first page: got %d entries, next %q; want 2 and a cursor", len(page.Entries), page.Next)
		}
		var next apiv1.AuditList
		h.mustAdmin(t, http.MethodGet, "/api/v1/audit?limit=2&before="+page.Next, nil, http.StatusOK, &next)
		if len(next.Entries) != 2 || next.Entries[0].ID == page.Entries[1].ID {
			t.Errorf("second page: got %+v, want the next 2 entries", next.Entries)
		}
	})
}

// waitUntil polls cond every 20 ms for up to 10 s; for state the
// orchestrator changes after it answered (a connection it closed).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
