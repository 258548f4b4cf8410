package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/store"
)

// msgBadAdminToken answers every failed admin-token authentication, the
// reason (unknown, revoked, expired) going only to the audit log.
const msgBadAdminToken = "admin token missing or invalid (send Authorization: Bearer <token>)"

// guard wraps a route's handler with what its declaration asks for:
//
//  1. A client address blocked for repeated failed authentications gets
//     429 with Retry-After on every route that authenticates (webhooks
//     excepted: their senders cannot slow down, and an HMAC cannot be
//     guessed).
//  2. An admin-token route authenticates the bearer token (401 when it is
//     missing or invalid, counted as a failure; 503 when the store cannot
//     say) and checks the route's permission against the token's role
//     (403 naming both).
//  3. Request bodies are bounded (bundle uploads by their own limits).
//  4. The audit log gets every mutation (any method but GET) of an
//     admin-token route, with its outcome; every join request that names
//     a token (join-token routes; the handler skips malformed ones), with
//     its outcome; and every request denied with
//     401 or 403, whoever denied it (the guard, or the handler of a
//     signed, job-token or agent-token route), except a webhook delivery
//     the handler did not record either (skipAudit: a flood of
//     unauthenticated deliveries is sampled). Its target is the URL path,
//     bounded to maxAuditTarget bytes.
func (s *Server) guard(rt route) http.Handler {
	limited := rt.access == adminToken || rt.access == jobToken || rt.access == agentToken || rt.access == joinToken
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := s.clientAddr(r)
		if limited {
			if wait, blocked := s.cfg.Limiter.Blocked(client); blocked {
				secs := int((wait + time.Second - 1) / time.Second)
				w.Header().Set("Retry-After", strconv.Itoa(secs))
				writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many failed authentications from %s; retry in %d s", client, secs))
				return
			}
		}
		entry := &store.AuditEntry{ActorType: auth.ActorAnonymous, Action: rt.action, Target: store.BoundText(r.URL.Path, maxAuditTarget), ClientAddr: client}
		if rt.access == adminToken {
			token, _ := bearerToken(r)
			p, err := s.authenticate(r, token)
			switch {
			case errors.Is(err, auth.ErrMissingToken) || errors.Is(err, auth.ErrInvalidToken):
				entry.Outcome, entry.Status, entry.Detail = auth.OutcomeDenied, http.StatusUnauthorized, err.Error()
				s.record(r.Context(), *entry)
				s.failedAuth(r.Context(), client)
				writeError(w, http.StatusUnauthorized, msgBadAdminToken)
				return
			case err != nil:
				s.log.Error("admin token lookup failed", "error", err)
				writeError(w, http.StatusServiceUnavailable, "authentication unavailable (see the orchestrator log)")
				return
			}
			*entry = p.Actor(*entry)
			if !p.Can(rt.perm) {
				msg := fmt.Sprintf("role %q does not have permission %q", p.Role, rt.perm)
				entry.Outcome, entry.Status, entry.Detail = auth.OutcomeDenied, http.StatusForbidden, msg
				s.record(r.Context(), *entry)
				writeError(w, http.StatusForbidden, msg)
				return
			}
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
		}
		if rt.access != public && rt.access != signed && r.Body != nil && !streamsBody(rt.pattern) {
			r.Body = http.MaxBytesReader(w, r.Body, maxJSONBody)
		}
		rec := &recorder{ResponseWriter: w}
		skip := new(bool)
		r = r.WithContext(context.WithValue(context.WithValue(r.Context(), auditKey{}, entry), auditSkipKey{}, skip))
		rt.handler(rec, r)

		status := rec.statusCode()
		denied := status == http.StatusUnauthorized || status == http.StatusForbidden
		switch {
		case rt.access == adminToken && r.Method != http.MethodGet && r.Method != http.MethodHead:
			entry.Status = status
			entry.Outcome = outcomeOf(status)
			if entry.Detail == "" && status >= 400 {
				entry.Detail = rec.errorText()
			}
			s.record(r.Context(), *entry)
		case rt.access == joinToken && !*skip:
			entry.Status = status
			entry.Outcome = outcomeOf(status)
			if entry.Detail == "" && status >= 400 {
				entry.Detail = rec.errorText()
			}
			s.record(r.Context(), *entry)
			if status == http.StatusUnauthorized {
				s.failedAuth(r.Context(), client)
			}
		case denied && rt.access != public && !*skip:
			entry.Outcome, entry.Status, entry.Detail = auth.OutcomeDenied, status, rec.errorText()
			switch rt.access {
			case jobToken:
				entry.ActorType = auth.ActorJobToken
			case agentToken:
				entry.ActorType = auth.ActorAgentToken
			}
			s.record(r.Context(), *entry)
			if status == http.StatusUnauthorized && limited {
				s.failedAuth(r.Context(), client)
			}
		}
	})
}

func outcomeOf(status int) string {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return auth.OutcomeDenied
	case status >= 400:
		return auth.OutcomeFailed
	}
	return auth.OutcomeAllowed
}

// record writes an audit entry, if there is an audit log.
func (s *Server) record(ctx context.Context, e store.AuditEntry) {
	if s.cfg.Audit != nil {
		s.cfg.Audit.Record(ctx, e)
	}
}

// failedAuth counts a failed authentication of client, and records the
// block when it is the one too many.
func (s *Server) failedAuth(ctx context.Context, client string) {
	if s.cfg.Limiter.Fail(client) {
		s.log.Warn("client blocked after repeated failed authentications", "client", client)
		s.record(ctx, store.AuditEntry{ActorType: auth.ActorAnonymous, Action: "auth.rate_limit", Target: "client:" + client,
			Outcome: auth.OutcomeDenied, Status: http.StatusTooManyRequests, ClientAddr: client,
			Detail: "too many failed authentications; requests from this address are refused for a while"})
	}
}

type auditKey struct{}

// auditSkipKey holds a *bool that skipAudit sets.
type auditSkipKey struct{}

// maxAuditTarget bounds the URL path an audit entry names as its target.
const maxAuditTarget = 512

// skipAudit tells the guard not to write the audit entry of a denied
// request: a webhook delivery sampled out of the delivery log.
func skipAudit(r *http.Request) {
	if skip, ok := r.Context().Value(auditSkipKey{}).(*bool); ok {
		*skip = true
	}
}

// audited sets what the audit entry of the request names as its target,
// and a detail (never a secret value), for handlers that know better than
// the URL path: the ID of a created token, say.
func audited(r *http.Request, target, detail string) {
	if e, ok := r.Context().Value(auditKey{}).(*store.AuditEntry); ok {
		if target != "" {
			e.Target = target
		}
		e.Detail = detail
	}
}

// clientAddr is the address of the client that made r (see
// auth.ClientAddr).
func (s *Server) clientAddr(r *http.Request) string {
	return auth.ClientAddr(r, s.cfg.TrustedProxies)
}

// principal returns the admin token the request authenticated with.
func principal(r *http.Request) auth.Principal {
	p, _ := auth.PrincipalFrom(r.Context())
	return p
}

// recorder remembers the status of a response, and the start of an
// error body for the audit log. It passes Flush (Server-Sent Events) and
// Unwrap (the WebSocket upgrade's Hijack) through.
type recorder struct {
	http.ResponseWriter
	status  int
	errBody []byte
}

// maxErrorText bounds the error body kept for the audit log.
const maxErrorText = 1024

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.status >= 400 && len(r.errBody) < maxErrorText {
		r.errBody = append(r.errBody, p[:min(len(p), maxErrorText-len(r.errBody))]...)
	}
	return r.ResponseWriter.Write(p)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// statusCode is the status sent: 200 when the handler wrote nothing.
func (r *recorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// errorText is the error message of an error answer.
func (r *recorder) errorText() string {
	var e apiv1.Error
	if json.Unmarshal(r.errBody, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(r.errBody))
}

// sessionPrincipalKey marks a request the dashboard makes for a session
// (ServeAs); only in-process callers can set it.
type sessionPrincipalKey struct{}

// authenticate returns the principal of an admin-token route's request:
// the session's for a request made through ServeAs, else the bearer
// token's.
func (s *Server) authenticate(r *http.Request, token string) (auth.Principal, error) {
	if p, ok := r.Context().Value(sessionPrincipalKey{}).(auth.Principal); ok {
		return p, nil
	}
	return s.cfg.AdminTokens.Authenticate(r.Context(), token)
}

// ServeAs serves r as if it carried an admin token of principal p: the
// route's permission is checked against p's role, and mutations are
// audited under p, exactly as for a bearer token. The dashboard calls it
// for its sessions, so each page and action is allowed exactly when the
// API route it mirrors is. Routes that do not take an admin token ignore
// p.
func (s *Server) ServeAs(p auth.Principal, w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(context.WithValue(r.Context(), sessionPrincipalKey{}, p))
	r.Header.Del("Authorization")
	s.mux.ServeHTTP(w, r)
}
