package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/store"
)

// maxTokenLifetime bounds expires_in.
const maxTokenLifetime = 10 * 365 * 24 * time.Hour

// parseExpiresIn reads an expires_in: a Go duration ("720h", "90m"), or
// a whole number of days ("30d"); "" means never.
func parseExpiresIn(s string, now time.Time) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return nil, fmt.Errorf("expires_in %q: want a duration such as 720h or 30d", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return nil, fmt.Errorf("expires_in %q: want a duration such as 720h or 30d", s)
		}
	}
	if d <= 0 || d > maxTokenLifetime {
		return nil, fmt.Errorf("expires_in %q: want more than 0 and at most 10 years", s)
	}
	t := now.Add(d)
	return &t, nil
}

func (s *Server) createAdminToken(w http.ResponseWriter, r *http.Request) {
	var in apiv1.AdminTokenRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	role, err := auth.ParseRole(in.Role)
	if err == nil {
		err = auth.CheckTokenName(in.Name)
	}
	var expires *time.Time
	if err == nil {
		expires, err = parseExpiresIn(in.ExpiresIn, s.cfg.Now())
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	token, row, err := s.cfg.AdminTokens.Create(r.Context(), in.Name, role, principal(r), expires)
	if err != nil {
		s.storeError(w, "admin token", err)
		return
	}
	audited(r, "token:"+row.ID, fmt.Sprintf("name %q, role %s", row.Name, row.Role))
	out := adminTokenOut(row)
	out.Token = token
	writeJSON(w, http.StatusCreated, out)
}

func adminTokenOut(t store.AdminToken) apiv1.AdminToken {
	return apiv1.AdminToken{ID: t.ID, Name: t.Name, Role: t.Role, Prefix: t.Prefix, CreatedBy: t.CreatedBy,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt}
}

func (s *Server) listAdminTokens(w http.ResponseWriter, r *http.Request) {
	rows, err := s.db.ListAdminTokens(r.Context())
	if err != nil {
		s.storeError(w, "list admin tokens", err)
		return
	}
	out := apiv1.AdminTokenList{Tokens: []apiv1.AdminToken{}}
	for _, t := range rows {
		out.Tokens = append(out.Tokens, adminTokenOut(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeAdminToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	audited(r, "token:"+id, "")
	changed, err := s.db.RevokeAdminToken(r.Context(), id, s.cfg.Now())
	if err == nil && !changed {
		err = store.ErrNotFound
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("admin token %q (or it is revoked already)", id), err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "status": "revoked"})
}

func (s *Server) createAgentToken(w http.ResponseWriter, r *http.Request) {
	var in apiv1.AgentTokenRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	for _, l := range in.Labels {
		if l == "" || strings.ContainsAny(l, ", \t\n") || strings.HasPrefix(l, "kici:") {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("label %q: labels are non-empty, hold no spaces or commas, and kici: is reserved", l))
			return
		}
	}
	expires, err := parseExpiresIn(in.ExpiresIn, s.cfg.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	token := auth.NewAgentToken()
	labels := in.Labels
	if labels == nil {
		labels = []string{}
	}
	row, err := s.db.CreateAgentToken(r.Context(), store.AgentToken{Hash: auth.HashToken(token), Labels: labels,
		CreatedBy: principal(r).ID, ExpiresAt: expires})
	if err != nil {
		s.storeError(w, "agent token", err)
		return
	}
	audited(r, "agent_token:"+row.ID, fmt.Sprintf("labels [%s]", strings.Join(labels, ", ")))
	writeJSON(w, http.StatusCreated, apiv1.AgentToken{ID: row.ID, Token: token, Labels: labels, ExpiresAt: row.ExpiresAt})
}

func (s *Server) listAgentTokens(w http.ResponseWriter, r *http.Request) {
	rows, err := s.db.ListAgentTokens(r.Context())
	if err != nil {
		s.storeError(w, "list agent tokens", err)
		return
	}
	connected := map[string]int{}
	for _, a := range s.disp.Agents() {
		if a.TokenID != "" {
			connected[a.TokenID]++
		}
	}
	out := apiv1.AgentTokenList{Tokens: []apiv1.AgentTokenInfo{}}
	for _, t := range rows {
		out.Tokens = append(out.Tokens, apiv1.AgentTokenInfo{ID: t.ID, Labels: t.Labels, CreatedBy: t.CreatedBy,
			CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt, Agents: connected[t.ID]})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeAgentToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	audited(r, "agent_token:"+id, "")
	changed, err := s.db.RevokeAgentToken(r.Context(), id, s.cfg.Now())
	if err == nil && !changed {
		err = store.ErrNotFound
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("agent token %q (or it is revoked already)", id), err)
		return
	}
	n := s.disp.DisconnectToken(id, "agent token revoked")
	audited(r, "", fmt.Sprintf("disconnected %d agent(s)", n))
	writeJSON(w, http.StatusOK, apiv1.AgentTokenRevoked{ID: id, Disconnected: n})
}
