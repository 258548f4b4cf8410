package api_test

import (
	"bytes"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/cluster/join"
	"github.com/kici-dev/kici/internal/cluster/pki"
	"github.com/kici-dev/kici/internal/orchestrator"
	"github.com/kici-dev/kici/internal/testsvc"
)

// startCoordinator runs an orchestrator as a cluster coordinator on a
// fresh PostgreSQL schema (skipped without KICI_TEST_DATABASE_URL).
func startCoordinator(t *testing.T) *harness {
	t.Helper()
	return startServerWith(t, testsvc.PostgresURL(t), func(c *orchestrator.Config) { c.ClusterRole = orchestrator.RoleCoordinator })
}

// TestJoinTokenRoutesAccess: the join-token routes need peer.manage: no
// token is 401, an auditor 403, an admin 201/200.
func TestJoinTokenRoutesAccess(t *testing.T) {
	t.Parallel()
	h := startCoordinator(t)
	auditor := h.newAdminToken(t, "auditor", auth.Auditor)
	admin := h.newAdminToken(t, "admin", auth.Admin)
	tests := []struct {
		name   string
		token  string
		method string
		body   string
		want   int
	}{
		{name: "create without a token", method: http.MethodPost, body: `{"ttl": "1h"}`, want: http.StatusUnauthorized},
		{name: "list without a token", method: http.MethodGet, want: http.StatusUnauthorized},
		{name: "create as auditor", token: auditor.Token, method: http.MethodPost, body: `{"ttl": "1h"}`, want: http.StatusForbidden},
		{name: "list as auditor", token: auditor.Token, method: http.MethodGet, want: http.StatusForbidden},
		{name: "create as admin", token: admin.Token, method: http.MethodPost, body: `{"ttl": "1h"}`, want: http.StatusCreated},
		{name: "list as admin", token: admin.Token, method: http.MethodGet, want: http.StatusOK},
		{name: "create with a bad ttl", token: admin.Token, method: http.MethodPost, body: `{"ttl": "soon"}`, want: http.StatusBadRequest},
		{name: "create for too long", token: admin.Token, method: http.MethodPost, body: `{"ttl": "31d"}`, want: http.StatusBadRequest},
		{name: "create for too long in hours", token: admin.Token, method: http.MethodPost, body: `{"ttl": "721h"}`, want: http.StatusBadRequest},
		{name: "create with an unknown field", token: admin.Token, method: http.MethodPost, body: `{"ttl": "1h", "role": "coordinator"}`, want: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := h.call(t, tt.token, tt.method, "/api/v1/peers/join-tokens", tt.body)
			if resp.status != tt.want {
				t.Fatalf("got %d %s, want %d", resp.status, resp.body, tt.want)
			}
			if tt.want == http.StatusForbidden {
				if got, want := resp.apiError(t).Error, `role "auditor" does not have permission "peer.manage"`; got != want {
					t.Errorf("got error %q, want %q", got, want)
				}
			}
		})
	}
}

// TestClusterJoin walks a worker's first join against a real coordinator:
// the token is created through the API, the worker joins with
// join.JoinCluster, the token is then spent, and every attempt is in the
// audit log without the secret.
func TestClusterJoin(t *testing.T) {
	t.Parallel()
	h := startCoordinator(t)
	ctx := t.Context()

	if resp := h.call(t, "", http.MethodGet, "/api/v1/cluster/ca", ""); resp.status != http.StatusNotFound {
		t.Errorf("CA before any token: got %d %s, want 404", resp.status, resp.body)
	}

	var created apiv1.JoinTokenCreated
	h.mustAdmin(t, http.MethodPost, "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "2h"}, http.StatusCreated, &created)
	tok, err := pki.ParseJoinToken(created.Token)
	if err != nil {
		t.Fatalf("the created token does not parse: %v", err)
	}
	if tok.ID != created.ID {
		t.Errorf("token id %q, answer says %q", tok.ID, created.ID)
	}
	if d := time.Until(created.ExpiresAt); d < 2*time.Hour-time.Minute || d > 2*time.Hour {
		t.Errorf("expires in %s, want 2h", d)
	}

	// The CA: public, PEM, the one the token pins.
	caResp := h.call(t, "", http.MethodGet, "/api/v1/cluster/ca", "")
	if caResp.status != http.StatusOK || caResp.header.Get("Content-Type") != "application/x-pem-file" {
		t.Fatalf("CA: got %d (%s) %s, want 200 application/x-pem-file", caResp.status, caResp.header.Get("Content-Type"), caResp.body)
	}
	caCert, err := tok.VerifyCA(caResp.body)
	if err != nil {
		t.Fatalf("the served CA is not the one the token pins: %v", err)
	}

	// Malformed and oversized requests are refused before any token check.
	for _, tt := range []struct {
		name string
		body []byte
		want int
	}{
		{name: "not JSON", body: []byte("token=1"), want: http.StatusBadRequest},
		{name: "fields missing", body: []byte(`{"token_id": "` + tok.ID + `"}`), want: http.StatusBadRequest},
		{name: "oversized", body: []byte(`{"csr_pem": "` + strings.Repeat("A", 70<<10) + `"}`), want: http.StatusRequestEntityTooLarge},
	} {
		resp := h.do(t, http.MethodPost, "/api/v1/cluster/join", http.Header{"Content-Type": {"application/json"}}, tt.body)
		if resp.status != tt.want {
			t.Errorf("%s: got %d %s, want %d", tt.name, resp.status, resp.body, tt.want)
		}
	}

	// A wrong secret and an unknown id: the same 401.
	other, err := pki.NewJoinToken(tok.CAHash)
	if err != nil {
		t.Fatal(err)
	}
	wrongSecret := tok
	wrongSecret.Secret = other.Secret
	var messages []string
	for _, bad := range []pki.JoinToken{wrongSecret, other} {
		_, err := join.JoinCluster(ctx, h.client, h.base, bad, "worker-1")
		var refused *join.RefusedError
		if !errors.As(err, &refused) || refused.Status != http.StatusUnauthorized {
			t.Fatalf("join with a bad token: got %v, want a 401 refusal", err)
		}
		messages = append(messages, refused.Message)
	}
	if messages[0] != messages[1] {
		t.Errorf("wrong secret answered %q, unknown id %q: want the same", messages[0], messages[1])
	}

	// The join.
	const node = "worker-4b1d"
	cred, err := join.JoinCluster(ctx, h.client, h.base, tok, node)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	leaf := cred.Current().Leaf
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the certificate does not verify against the cluster CA: %v", err)
	}
	if id, err := pki.NodeIDOf(leaf); err != nil || id != node {
		t.Errorf("NodeIDOf: got (%q, %v), want %q", id, err, node)
	}

	// Single use.
	_, err = join.JoinCluster(ctx, h.client, h.base, tok, node)
	var refused *join.RefusedError
	if !errors.As(err, &refused) || refused.Status != http.StatusConflict {
		t.Errorf("second join with the token: got %v, want a 409 refusal", err)
	}

	// The listing: spent by the node, no secret anywhere.
	listResp := h.admin(t, http.MethodGet, "/api/v1/peers/join-tokens", nil)
	if bytes.Contains(listResp.body, []byte(tok.Secret)) || bytes.Contains(listResp.body, []byte(pki.HashSecret(tok.Secret))) {
		t.Errorf("the listing holds the secret or its hash: %s", listResp.body)
	}
	var list apiv1.JoinTokenList
	listResp.decode(t, &list)
	if len(list.Tokens) != 1 || list.Tokens[0].ID != tok.ID || list.Tokens[0].State != apiv1.JoinTokenUsed || list.Tokens[0].UsedBy != node {
		t.Errorf("listing: got %+v, want token %s used by %s", list.Tokens, tok.ID, node)
	}

	// The audit log: every attempt naming a token, under that token's
	// id; the secret nowhere.
	auditResp := h.admin(t, http.MethodGet, "/api/v1/audit?action=cluster.join", nil)
	if bytes.Contains(auditResp.body, []byte(tok.Secret)) {
		t.Errorf("the audit log holds the secret: %s", auditResp.body)
	}
	var audit apiv1.AuditList
	auditResp.decode(t, &audit)
	outcomes := map[string]int{}
	for _, e := range audit.Entries {
		if e.ActorType != "join_token" {
			t.Errorf("audit entry %+v: actor type %q, want join_token", e, e.ActorType)
		}
		outcomes[e.ActorID+" "+e.Outcome]++
	}
	want := map[string]int{tok.ID + " denied": 1, other.ID + " denied": 1, tok.ID + " allowed": 1, tok.ID + " failed": 1}
	for k, n := range want {
		if outcomes[k] != n {
			t.Errorf("audit entries %q: got %d, want %d (all: %v)", k, outcomes[k], n, outcomes)
		}
	}
	var created2 apiv1.AuditList
	h.mustAdmin(t, http.MethodGet, "/api/v1/audit?action=join_token.create", nil, http.StatusOK, &created2)
	if len(created2.Entries) != 1 || created2.Entries[0].Target != "join_token:"+tok.ID {
		t.Errorf("audit of the token's creation: got %+v, want one entry naming join_token:%s", created2.Entries, tok.ID)
	}
}

// A worker whose token pins another CA stops after fetching the CA: its
// join request, and so its secret, never reaches the coordinator.
func TestClusterJoinWrongCANeverSendsTheSecret(t *testing.T) {
	t.Parallel()
	h := startCoordinator(t)
	var created apiv1.JoinTokenCreated
	h.mustAdmin(t, http.MethodPost, "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{}, http.StatusCreated, &created)
	tok, err := pki.ParseJoinToken(created.Token)
	if err != nil {
		t.Fatal(err)
	}

	// The worker reaches the coordinator through a proxy that counts the
	// requests to the join route.
	target, err := url.Parse(h.base)
	if err != nil {
		t.Fatal(err)
	}
	var joins, caFetches atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case join.JoinPath:
			joins.Add(1)
		case join.CAPath:
			caFetches.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	otherCA, err := pki.NewCA("elsewhere", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pinned := tok
	pinned.CAHash = otherCA.Hash()
	_, err = join.JoinCluster(t.Context(), front.Client(), front.URL, pinned, "worker-1")
	if !errors.Is(err, pki.ErrCAMismatch) {
		t.Fatalf("got %v, want pki.ErrCAMismatch", err)
	}
	if caFetches.Load() != 1 || joins.Load() != 0 {
		t.Errorf("requests through the proxy: %d CA fetches and %d joins, want 1 and 0", caFetches.Load(), joins.Load())
	}
	if strings.Contains(err.Error(), tok.Secret) {
		t.Errorf("error %q holds the secret", err)
	}
	// The token was not spent: the right pin joins.
	if _, err := join.JoinCluster(t.Context(), front.Client(), front.URL, tok, "worker-1"); err != nil {
		t.Errorf("join with the right pin: %v", err)
	}
	if joins.Load() != 1 {
		t.Errorf("joins through the proxy: got %d, want 1", joins.Load())
	}
}

// TestRevokeJoinToken: a revoked token cannot be used to join (403), is
// listed revoked, revoking it again is 204 and an unknown one 404.
func TestRevokeJoinToken(t *testing.T) {
	t.Parallel()
	h := startCoordinator(t)
	var created apiv1.JoinTokenCreated
	h.mustAdmin(t, http.MethodPost, "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, http.StatusCreated, &created)
	for range 2 {
		if resp := h.admin(t, http.MethodDelete, "/api/v1/peers/join-tokens/"+created.ID, nil); resp.status != http.StatusNoContent {
			t.Fatalf("revoke: got %d %s, want 204", resp.status, resp.body)
		}
	}
	if resp := h.admin(t, http.MethodDelete, "/api/v1/peers/join-tokens/no-such-token", nil); resp.status != http.StatusNotFound {
		t.Errorf("revoke an unknown token: got %d %s, want 404", resp.status, resp.body)
	}
	tok, err := pki.ParseJoinToken(created.Token)
	if err != nil {
		t.Fatal(err)
	}
	_, err = join.JoinCluster(t.Context(), h.client, h.base, tok, "worker-r")
	var refused *join.RefusedError
	if !errors.As(err, &refused) || refused.Status != http.StatusForbidden {
		t.Fatalf("join with a revoked token: got %v, want a 403 refusal", err)
	}
	var list apiv1.JoinTokenList
	h.mustAdmin(t, http.MethodGet, "/api/v1/peers/join-tokens", nil, http.StatusOK, &list)
	if len(list.Tokens) != 1 || list.Tokens[0].State != apiv1.JoinTokenRevoked || list.Tokens[0].RevokedAt == nil {
		t.Errorf("tokens after the revoke: %+v, want one revoked", list.Tokens)
	}
}
