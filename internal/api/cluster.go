package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/cluster/join"
	"github.com/kici-dev/kici/internal/store"
)

// maxJoinBody bounds a join request: a token id, a secret, a node id and
// a certificate request (well under 2 KiB).
const maxJoinBody = 64 << 10

// actorJoinToken is the actor type of a join request in the audit log; the
// actor id is the token id the request names.
const actorJoinToken = "join_token"

// msgNotCoordinator answers the join routes of an orchestrator that is not
// a coordinator of a cluster.
const msgNotCoordinator = "this orchestrator is not a cluster coordinator (KICI_CLUSTER_ROLE=coordinator): only coordinators of a cluster issue join tokens and admit workers"

// clusterCA answers GET /api/v1/cluster/ca with the cluster CA
// certificate. It is public: a joining worker has no credential yet, and
// checks what it gets against the hash its join token pins.
func (s *Server) clusterCA(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Join == nil {
		writeError(w, http.StatusNotFound, msgNotCoordinator)
		return
	}
	pem, err := s.cfg.Join.CACertPEM(r.Context())
	switch {
	case errors.Is(err, join.ErrNoCA):
		writeError(w, http.StatusNotFound, err.Error())
		return
	case err != nil:
		s.storeError(w, "read cluster CA", err)
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Header().Set("Content-Length", strconv.Itoa(len(pem)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(pem)
}

// clusterJoin answers POST /api/v1/cluster/join: a worker's first join,
// authenticated by the join token's secret in the body. 200 with the
// worker's certificate; 401 when the token id or secret is not
// recognised (counted as a failed authentication, and the same answer
// for both); 403 for an expired or revoked token; 409 for a used one; 400
// for a malformed request. Every attempt that names a token is audited,
// with the token id as the actor; the secret never is.
func (s *Server) clusterJoin(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Join == nil {
		skipAudit(r)
		writeError(w, http.StatusConflict, msgNotCoordinator)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxJoinBody)
	var in apiv1.ClusterJoinRequest
	if !decodeJSON(w, r, &in) {
		skipAudit(r)
		return
	}
	if in.TokenID == "" || in.Secret == "" || in.NodeID == "" || in.CSRPEM == "" {
		skipAudit(r)
		writeError(w, http.StatusBadRequest, "token_id, secret, node_id and csr_pem are all required")
		return
	}
	auditActor(r, actorJoinToken, store.BoundText(in.TokenID, 64))
	audited(r, "node:"+store.BoundText(in.NodeID, 80), "")
	out, err := s.cfg.Join.Join(r.Context(), join.JoinRequest{TokenID: in.TokenID, Secret: in.Secret, NodeID: in.NodeID, CSRPEM: []byte(in.CSRPEM)})
	switch {
	case errors.Is(err, join.ErrTokenInvalid):
		writeError(w, http.StatusUnauthorized, join.ErrTokenInvalid.Error())
	case errors.Is(err, join.ErrTokenExpired), errors.Is(err, join.ErrTokenRevoked):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, join.ErrTokenUsed):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, join.ErrBadRequest):
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		s.storeError(w, "join", err)
	default:
		writeJSON(w, http.StatusOK, apiv1.ClusterJoinResponse{NodeID: out.NodeID, CertificatePEM: string(out.CertificatePEM), CAPEM: string(out.CAPEM)})
	}
}

// createJoinToken answers POST /api/v1/peers/join-tokens {"ttl": "24h"}
// with 201 and the token, shown this once.
func (s *Server) createJoinToken(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Join == nil {
		writeError(w, http.StatusConflict, msgNotCoordinator)
		return
	}
	var in apiv1.JoinTokenRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	ttl, err := parseTTL(in.TTL)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	tok, expires, err := s.cfg.Join.CreateToken(r.Context(), ttl, principal(r).ID)
	switch {
	case errors.Is(err, join.ErrBadTTL):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("ttl %q: %v", in.TTL, err))
		return
	case err != nil:
		s.storeError(w, "create join token", err)
		return
	}
	audited(r, "join_token:"+tok.ID, "expires "+expires.UTC().Format(time.RFC3339))
	writeJSON(w, http.StatusCreated, apiv1.JoinTokenCreated{Token: tok.Encode(), ID: tok.ID, ExpiresAt: expires})
}

// listJoinTokens answers GET /api/v1/peers/join-tokens: every token with
// its state, never a secret.
func (s *Server) listJoinTokens(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Join == nil {
		writeError(w, http.StatusConflict, msgNotCoordinator)
		return
	}
	list, err := s.cfg.Join.ListTokens(r.Context())
	if err != nil {
		s.storeError(w, "list join tokens", err)
		return
	}
	out := apiv1.JoinTokenList{Tokens: []apiv1.JoinTokenInfo{}}
	for _, t := range list {
		out.Tokens = append(out.Tokens, apiv1.JoinTokenInfo{ID: t.ID, State: t.State, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt,
			ExpiresAt: t.ExpiresAt, UsedAt: t.UsedAt, UsedBy: t.UsedBy, RevokedAt: t.RevokedAt})
	}
	writeJSON(w, http.StatusOK, out)
}

// parseTTL reads a join token's ttl: a Go duration ("24h", "90m") or a
// whole number of days ("7d"); "" is 0, the default. The upper bound is
// the join service's.
func parseTTL(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n > 100*365 { // beyond any bound, and before time.Duration overflows
			return 0, fmt.Errorf("ttl %q: want a duration such as 24h or 7d", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("ttl %q: want a duration such as 24h or 7d", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("ttl %q: want more than 0", s)
	}
	return d, nil
}

// auditActor sets the actor of the request's audit entry, for routes
// whose caller the handler identifies (a join token, by its id).
func auditActor(r *http.Request, actorType, actorID string) {
	if e, ok := r.Context().Value(auditKey{}).(*store.AuditEntry); ok {
		e.ActorType, e.ActorID = actorType, actorID
	}
}

// revokeJoinToken answers DELETE /api/v1/peers/join-tokens/{id}: 204 once
// the token can no longer be used (revoking it again too), 404 for an
// unknown one. A token already used stays used: the worker that joined
// with it keeps its certificate (revoke the worker for that).
func (s *Server) revokeJoinToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	audited(r, "join_token:"+store.BoundText(id, 64), "")
	if s.cfg.Join == nil {
		writeError(w, http.StatusConflict, msgNotCoordinator)
		return
	}
	err := s.cfg.Join.RevokeToken(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("join token %q is not known (see kici-admin peers join-token list)", id))
	case err != nil:
		s.storeError(w, "revoke join token", err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
