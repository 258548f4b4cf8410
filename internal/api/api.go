// Package api is the orchestrator's HTTP surface: the REST API under
// /api/v1, Server-Sent Events, webhooks, health, and the source archives
// agents download. Handlers decode, call into the pipeline, store and
// dispatcher, and encode; they hold no business rules.
//
// Every route is declared in routes() with the access it needs and, for
// routes that take an admin token, the permission (auth.Permission) its
// caller's role must have, next to the route; guard enforces both, limits
// failed authentications per client address, and writes the audit log.
// A *Server is an http.Handler, safe for concurrent use.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/archivecache"
	"github.com/kici-dev/kici/internal/artifacts"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/caches"
	"github.com/kici-dev/kici/internal/cluster/join"
	"github.com/kici-dev/kici/internal/dispatch"
	"github.com/kici-dev/kici/internal/logs"
	"github.com/kici-dev/kici/internal/metrics"
	"github.com/kici-dev/kici/internal/pipeline"
	"github.com/kici-dev/kici/internal/secrets"
	"github.com/kici-dev/kici/internal/store"
)

// maxJSONBody bounds every JSON request body of the API.
const maxJSONBody = 1 << 20

// Config tunes the API.
type Config struct {
	// AdminTokens authenticates admin tokens (the bootstrap token
	// included). Required.
	AdminTokens *auth.AdminTokens
	// Audit receives an entry for every mutation and every denied
	// request; nil records nothing.
	Audit *auth.AuditLog
	// Limiter blocks client addresses after repeated failed
	// authentications; nil never blocks.
	Limiter *auth.FailureLimiter
	// Secrets stores secrets; nil answers 503 on the secrets routes.
	Secrets *secrets.Service
	// MaxWebhookBody bounds webhook bodies in bytes.
	MaxWebhookBody int64
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Metrics receives the webhook counters and serves GET /metrics; nil
	// answers 404 there.
	Metrics *metrics.Registry
	// Scalers is the auto-scaler; nil when none is configured.
	Scalers ScalerAdmin
	// NodeScalers reaches the scalers of the cluster's workers for the
	// node parameter of the scaler orphans routes; nil on an orchestrator
	// that is not a coordinator (the parameter is then refused with 400).
	NodeScalers NodeScalers
	// Diagnoser runs GET /api/v1/diagnose; nil answers 503 there.
	Diagnoser Diagnoser
	// Schedules lists the schedule triggers for GET /api/v1/schedules;
	// nil answers 503 there.
	Schedules ScheduleLister
	// Peers lists the cluster's nodes for GET /api/v1/peers; nil answers
	// 503 there.
	Peers PeerLister
	// Join keeps the cluster CA and join tokens and admits workers; nil
	// (an orchestrator that is not a coordinator) answers 404 on GET
	// /api/v1/cluster/ca and 409 on the other join routes.
	Join *join.Service
	// Peer serves /ws/peer, the workers' channel (mutual TLS inside the
	// WebSocket authenticates both ends); nil unless a coordinator.
	Peer http.Handler
	// Archives caches source archives for agents; nil makes every download
	// produce its archive again.
	Archives *archivecache.Cache
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (for the failed-authentication limit and the audit log);
	// none means the peer's address is the client's.
	TrustedProxies []netip.Prefix
	// AllowFileGitURLs accepts file:// URLs for git sources (see
	// orchestrator.Config.AllowFileGitURLs).
	AllowFileGitURLs bool
	// Artifacts and Caches keep jobs' artifacts and cache entries; nil
	// answers 503 on their routes.
	Artifacts *artifacts.Service
	Caches    *caches.Service
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
	// rejects samples the rejected webhook deliveries that are recorded.
	rejects *rejectSampler
}

// New builds the API. ws serves /ws (the agent endpoint). It panics if a
// route does not declare a valid access and, for admin-token routes, a
// known permission: a programming error every test catches.
func New(logger *slog.Logger, db *store.DB, pipe *pipeline.Pipeline, disp *dispatch.Dispatcher, logStore *logs.Store, tokens *auth.JobTokens, ws http.Handler, cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxWebhookBody <= 0 {
		cfg.MaxWebhookBody = 25 << 20
	}
	s := &Server{log: logger, db: db, pipe: pipe, disp: disp, logs: logStore, tokens: tokens, cfg: cfg, mux: http.NewServeMux(), ws: ws,
		rejects: newRejectSampler(rejectedPerKey, rejectedTotal, rejectWindow, cfg.Now)}
	for _, r := range s.routes() {
		if err := r.check(); err != nil {
			panic(err)
		}
		s.mux.Handle(r.pattern, s.guard(r))
	}
	return s
}

// access is how a route authenticates its caller.
type access int

const (
	public     access = iota // anyone (health, readiness, metrics)
	signed                   // webhooks: an HMAC signature, checked by the handler
	jobToken                 // a job token of a running job, checked by the handler
	agentToken               // /ws: an agent token, checked by agentws
	joinToken                // a cluster join token in the body, checked by the handler
	adminToken               // an admin token whose role has the route's permission
)

func (a access) String() string {
	switch a {
	case public:
		return "public"
	case signed:
		return "signed"
	case jobToken:
		return "job-token"
	case agentToken:
		return "agent-token"
	case joinToken:
		return "join-token"
	case adminToken:
		return "admin-token"
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// route is one entry of the route table. Its fields are positional in
// routes(), so a route cannot leave its access or permission out.
type route struct {
	pattern string
	access  access
	// perm is the permission an adminToken route needs; "" for the others.
	perm auth.Permission
	// action names what the route does in the audit log, e.g.
	// "secret.set"; "" for public routes.
	action  string
	handler http.HandlerFunc
}

// check reports a route whose declaration is incomplete.
func (r route) check() error {
	switch {
	case r.access == adminToken && !r.perm.Valid():
		return fmt.Errorf("api: route %q needs an admin token but declares no known permission (got %q)", r.pattern, r.perm)
	case r.access != adminToken && r.perm != "":
		return fmt.Errorf("api: route %q declares permission %q but does not take an admin token", r.pattern, r.perm)
	case r.access < public || r.access > adminToken:
		return fmt.Errorf("api: route %q has unknown access %d", r.pattern, r.access)
	case r.access != public && r.action == "":
		return fmt.Errorf("api: route %q has no audit action", r.pattern)
	}
	return nil
}

func (s *Server) routes() []route {
	return []route{
		{"GET /healthz", public, "", "", s.healthz},
		{"GET /readyz", public, "", "", s.readyz},
		{"GET /metrics", public, "", "", s.metrics}, // public, as CONTRACT.md says
		{"GET /ws", agentToken, "", "agent.connect", s.serveWS},
		// The channel authenticates itself: mutual TLS with the cluster
		// CA runs inside the WebSocket (internal/cluster/peer).
		{"GET /ws/peer", public, "", "", s.servePeer},
		{"POST /webhooks/github/{source}", signed, "", "webhook.github", s.githubWebhook},
		{"POST /webhooks/generic/{source}", signed, "", "webhook.generic", s.genericWebhook},
		{"GET /api/v1/sources/{name}/archive/{sha}", jobToken, "", "source.archive", s.archive},
		{"GET /api/v1/sources", adminToken, auth.ContextRead, "source.list", s.listSources},
		{"POST /api/v1/sources", adminToken, auth.ContextCreate, "source.create", s.createSource},
		{"DELETE /api/v1/sources/{name}", adminToken, auth.ContextDelete, "source.delete", s.deleteSource},
		{"POST /api/v1/sources/{name}/trigger", adminToken, auth.RunTrigger, "run.trigger", s.trigger},
		{"GET /api/v1/sources/{name}/deliveries", adminToken, auth.EventLogRead, "source.deliveries.list", s.listDeliveries},
		{"POST /api/v1/sources/{name}/deliveries/{id}/redeliver", adminToken, auth.RunTrigger, "source.deliveries.redeliver", s.redeliver},
		{"GET /api/v1/runs", adminToken, auth.RunRead, "run.list", s.listRuns},
		{"GET /api/v1/runs/{id}", adminToken, auth.RunRead, "run.read", s.getRun},
		{"POST /api/v1/runs/{id}/cancel", adminToken, auth.RunCancel, "run.cancel", s.cancelRun},
		{"POST /api/v1/runs/{id}/rerun", adminToken, auth.RunTrigger, "run.rerun", s.rerunRun},
		{"POST /api/v1/runs/{id}/approve", adminToken, auth.RunApprove, "run.approve", s.approveRun},
		{"GET /api/v1/runs/{id}/jobs/{job}/logs", adminToken, auth.RunRead, "run.logs.read", s.jobLogs},
		{"GET /api/v1/runs/{id}/events", adminToken, auth.RunRead, "run.events.read", s.runEvents},
		{"GET /api/v1/runs/{id}/artifacts", adminToken, auth.RunRead, "run.artifacts.list", s.listArtifacts},
		{"GET /api/v1/runs/{id}/artifacts/{job}", adminToken, auth.RunRead, "run.artifacts.download", s.downloadArtifacts},
		// A job's agent uploads its artifacts, fetches those of the jobs it
		// needs, and restores and saves its caches with the job token.
		{"PUT /api/v1/runs/{id}/jobs/{job}/artifacts", jobToken, "", "artifact.upload", s.uploadArtifacts},
		{"GET /api/v1/runs/{id}/jobs/{job}/artifacts", jobToken, "", "artifact.fetch", s.fetchUpstreamArtifacts},
		{"GET /api/v1/caches", jobToken, "", "cache.lookup", s.lookupCache},
		{"GET /api/v1/caches/{id}", jobToken, "", "cache.fetch", s.fetchCache},
		{"PUT /api/v1/caches", jobToken, "", "cache.save", s.saveCache},
		{"GET /api/v1/queue", adminToken, auth.RunRead, "queue.list", s.queue},
		{"GET /api/v1/schedules", adminToken, auth.RunRead, "schedule.list", s.listSchedules},
		{"GET /api/v1/agents", adminToken, auth.ScalerRead, "agent.list", s.agents},
		{"GET /api/v1/peers", adminToken, auth.ScalerRead, "peer.list", s.listPeers},
		{"DELETE /api/v1/peers/{id}", adminToken, auth.PeerManage, "peer.forget", s.forgetPeer},
		{"POST /api/v1/peers/{id}/revoke", adminToken, auth.PeerManage, "peer.revoke", s.revokePeer},
		{"POST /api/v1/peers/join-tokens", adminToken, auth.PeerManage, "join_token.create", s.createJoinToken},
		{"GET /api/v1/peers/join-tokens", adminToken, auth.PeerManage, "join_token.list", s.listJoinTokens},
		{"DELETE /api/v1/peers/join-tokens/{id}", adminToken, auth.PeerManage, "join_token.revoke", s.revokeJoinToken},
		{"GET /api/v1/cluster/ca", public, "", "", s.clusterCA}, // public: the CA certificate is not secret
		{"POST /api/v1/cluster/join", joinToken, "", "cluster.join", s.clusterJoin},
		{"POST /api/v1/agents/{id}/drain", adminToken, auth.ScalerManage, "agent.drain", s.drainAgent},
		{"DELETE /api/v1/agents/{id}/drain", adminToken, auth.ScalerManage, "agent.undrain", s.undrainAgent},
		{"POST /api/v1/agent-tokens", adminToken, auth.TokenManage, "agent_token.create", s.createAgentToken},
		{"GET /api/v1/agent-tokens", adminToken, auth.TokenManage, "agent_token.list", s.listAgentTokens},
		{"DELETE /api/v1/agent-tokens/{id}", adminToken, auth.TokenManage, "agent_token.revoke", s.revokeAgentToken},
		{"POST /api/v1/tokens", adminToken, auth.TokenManage, "token.create", s.createAdminToken},
		{"GET /api/v1/tokens", adminToken, auth.TokenManage, "token.list", s.listAdminTokens},
		{"DELETE /api/v1/tokens/{id}", adminToken, auth.TokenManage, "token.revoke", s.revokeAdminToken},
		{"GET /api/v1/secrets", adminToken, auth.SecretRead, "secret.list", s.listSecrets},
		{"PUT /api/v1/secrets/{name}", adminToken, auth.SecretWrite, "secret.set", s.setSecret},
		{"DELETE /api/v1/secrets/{name}", adminToken, auth.SecretDelete, "secret.delete", s.deleteSecret},
		{"POST /api/v1/secrets/rotate-key", adminToken, auth.KeyRotate, "key.rotate", s.rotateKey},
		// An environment's protection guards who gets its secrets: the
		// secret permissions govern it.
		{"GET /api/v1/environments", adminToken, auth.SecretRead, "environment.list", s.listEnvironments},
		{"PUT /api/v1/environments/{name}", adminToken, auth.SecretWrite, "environment.set", s.setEnvironment},
		{"DELETE /api/v1/environments/{name}", adminToken, auth.SecretDelete, "environment.delete", s.deleteEnvironment},
		{"GET /api/v1/audit", adminToken, auth.AuditRead, "audit.list", s.listAudit},
		{"GET /api/v1/scalers", adminToken, auth.ScalerRead, "scaler.status", s.scalerStatus},
		{"POST /api/v1/scalers/reload", adminToken, auth.ScalerManage, "scaler.reload", s.scalerReload},
		{"POST /api/v1/scalers/{name}/retry", adminToken, auth.ScalerManage, "scaler.retry", s.scalerRetry},
		{"GET /api/v1/scalers/orphans", adminToken, auth.ScalerRead, "scaler.orphans.list", s.scalerOrphans},
		{"POST /api/v1/scalers/orphans/stop", adminToken, auth.ScalerManage, "scaler.orphans.stop", s.scalerStopOrphans},
		{"GET /api/v1/diagnose", adminToken, auth.ScalerRead, "diagnose", s.diagnose},
	}
}

// RouteInfo describes one route of the API, for tests and docs.
type RouteInfo struct {
	// Pattern is the net/http pattern, e.g. "GET /api/v1/runs/{id}".
	Pattern string
	// Access is public, signed, job-token, agent-token or admin-token.
	Access string
	// Permission is what an admin-token route needs; "" otherwise.
	Permission auth.Permission
	// Action names the route in the audit log.
	Action string
}

// Routes lists every route the API serves, from the same table New
// routes with.
func Routes() []RouteInfo {
	var out []RouteInfo
	for _, r := range (&Server{}).routes() {
		out = append(out, RouteInfo{Pattern: r.pattern, Access: r.access.String(), Permission: r.perm, Action: r.action})
	}
	return out
}

// Mount serves h on patterns beside the API's routes: the dashboard's
// pages. Call it before serving.
func (s *Server) Mount(patterns []string, h http.Handler) {
	for _, p := range patterns {
		s.mux.Handle(p, h)
	}
}

// ServeHTTP serves every route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) { s.ws.ServeHTTP(w, r) }

// servePeer hands /ws/peer to the coordinator's cluster channel.
func (s *Server) servePeer(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Peer == nil {
		writeError(w, http.StatusNotFound, "the cluster channel is served by coordinators only (KICI_CLUSTER_ROLE=coordinator)")
		return
	}
	s.cfg.Peer.ServeHTTP(w, r)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		http.NotFound(w, r)
		return
	}
	s.cfg.Metrics.Handler().ServeHTTP(w, r)
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
