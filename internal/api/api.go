// Package api is the orchestrator's HTTP surface: the REST API under
// /api/v1, Server-Sent Events, webhooks, health, and the source archives
// agents download. Handlers decode, call into the pipeline, store and
// dispatcher, and encode; they hold no business rules.
//
// Every route is declared in routes() with the access it needs, next to
// the route. A *Server is an http.Handler, safe for concurrent use.
package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/dispatch"
	"github.com/kici-dev/kici/internal/logs"
	"github.com/kici-dev/kici/internal/metrics"
	"github.com/kici-dev/kici/internal/pipeline"
	"github.com/kici-dev/kici/internal/store"
)

// maxJSONBody bounds every JSON request body of the API.
const maxJSONBody = 1 << 20

// Config tunes the API.
type Config struct {
	// BootstrapAdminToken is accepted as an owner token; empty disables it.
	BootstrapAdminToken string
	// MaxWebhookBody bounds webhook bodies in bytes.
	MaxWebhookBody int64
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Metrics receives the webhook counters and serves GET /metrics; nil
	// leaves /metrics unrouted.
	Metrics *metrics.Registry
	// Scalers is the auto-scaler; nil when none is configured.
	Scalers ScalerAdmin
}

// Server is the HTTP API.
type Server struct {
	log    *slog.Logger
	db     *store.DB
	pipe   *pipeline.Pipeline
	disp   *dispatch.Dispatcher
	logs   *logs.Store
	tokens *auth.JobTokens
	cfg    Config
	mux    *http.ServeMux
	ws     http.Handler
}

// New builds the API. ws serves /ws (the agent endpoint).
func New(logger *slog.Logger, db *store.DB, pipe *pipeline.Pipeline, disp *dispatch.Dispatcher, logStore *logs.Store, tokens *auth.JobTokens, ws http.Handler, cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxWebhookBody <= 0 {
		cfg.MaxWebhookBody = 25 << 20
	}
	s := &Server{log: logger, db: db, pipe: pipe, disp: disp, logs: logStore, tokens: tokens, cfg: cfg, mux: http.NewServeMux(), ws: ws}
	for _, r := range s.routes() {
		s.mux.Handle(r.pattern, s.guard(r))
	}
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", cfg.Metrics.Handler()) // public, as CONTRACT.md says
	}
	return s
}

// access is who may call a route.
type access int

const (
	public   access = iota // anyone (health, metrics)
	signed                 // webhooks: checked by HMAC in the handler
	jobToken               // an agent with the job token of a running job
	admin                  // an admin token
)

type route struct {
	pattern string
	access  access
	handler http.HandlerFunc
}

func (s *Server) routes() []route {
	return []route{
		{"GET /healthz", public, s.healthz},
		{"GET /readyz", public, s.readyz},
		{"GET /ws", public, s.ws.ServeHTTP}, // agent tokens are checked by agentws
		{"POST /webhooks/github/{source}", signed, s.githubWebhook},
		{"POST /webhooks/generic/{source}", signed, s.genericWebhook},
		{"GET /api/v1/sources/{name}/archive/{sha}", jobToken, s.archive},
		{"GET /api/v1/sources", admin, s.listSources},
		{"POST /api/v1/sources", admin, s.createSource},
		{"DELETE /api/v1/sources/{name}", admin, s.deleteSource},
		{"POST /api/v1/sources/{name}/trigger", admin, s.trigger},
		{"GET /api/v1/runs", admin, s.listRuns},
		{"GET /api/v1/runs/{id}", admin, s.getRun},
		{"POST /api/v1/runs/{id}/cancel", admin, s.cancelRun},
		{"POST /api/v1/runs/{id}/rerun", admin, s.rerunRun},
		{"GET /api/v1/runs/{id}/jobs/{job}/logs", admin, s.jobLogs},
		{"GET /api/v1/runs/{id}/events", admin, s.runEvents},
		{"GET /api/v1/queue", admin, s.queue},
		{"GET /api/v1/agents", admin, s.agents},
		{"POST /api/v1/agent-tokens", admin, s.createAgentToken},
		{"GET /api/v1/scalers", admin, s.scalerStatus},
		{"POST /api/v1/scalers/reload", admin, s.scalerReload},
		{"GET /api/v1/scalers/orphans", admin, s.scalerOrphans},
		{"POST /api/v1/scalers/orphans/stop", admin, s.scalerStopOrphans},
	}
}

// ServeHTTP serves every route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

func (s *Server) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.access == admin && !s.adminAllowed(r) {
			writeError(w, http.StatusUnauthorized, "admin token missing or invalid (send Authorization: Bearer <token>)")
			return
		}
		if rt.access != public && rt.access != signed && r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxJSONBody)
		}
		rt.handler(w, r)
	})
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive (RFC 9110, section 11.1).
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return token, true
}

func (s *Server) adminAllowed(r *http.Request) bool {
	token, ok := bearerToken(r)
	if !ok || token == "" || s.cfg.BootstrapAdminToken == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.BootstrapAdminToken)) == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string, details ...string) {
	writeJSON(w, status, apiv1.Error{Error: msg, Details: details})
}

// decodeJSON reads a JSON body strictly, answering 400/413 itself: the
// body is exactly one JSON value (white space around it is fine) with no
// field dst does not have.
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	switch {
	case errors.Is(err, io.EOF):
		err = errors.New("the body is empty, want a JSON object")
	case err == nil:
		// Read on to the end, so that a second value or trailing garbage
		// is refused rather than silently dropped (and the body bound
		// holds for all of it).
		_, err = dec.Token()
		switch {
		case errors.Is(err, io.EOF):
			err = nil
		case err == nil:
			err = errors.New("unexpected data after the JSON value")
		default:
			err = fmt.Errorf("unexpected data after the JSON value: %w", err)
		}
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", tooBig.Limit))
			return false
		}
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

// storeError maps store errors to HTTP answers.
func (s *Server) storeError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, what+": not found")
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, what+": already exists")
	case errors.Is(err, context.Canceled):
	default:
		s.log.Error("request failed", "what", what, "error", err)
		writeError(w, http.StatusInternalServerError, what+": internal error (see the orchestrator log)")
	}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "database unreachable", "error": err.Error()})
		return
	}
	st, err := s.db.MigrationStatus(ctx)
	if err != nil || !st.UpToDate() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "migrations pending", "migrations": st})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
