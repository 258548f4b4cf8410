// Package web is kici's dashboard: server-rendered HTML pages of the
// runs, their logs, the queue and the fleet, for a browser session that
// logged in with an admin token.
//
// Every page and action is served through the API (Config.API's ServeAs)
// with the session's principal, so each is allowed exactly when the API
// route it mirrors is, and mutations are audited as API calls are. The
// pages work without JavaScript; one small script (static/kici.js) makes
// the run page live. Everything is embedded: no build step, no CDN.
//
// Security: sessions live server-side (store.WebSession: the cookie holds
// a random id, the database only its hash and the hash of the admin token,
// which is re-checked on every request, so revoking the token ends its
// sessions); the cookie is HttpOnly, SameSite=Strict and Secure over
// HTTPS; every form carries the session's CSRF token; every response has
// a Content-Security-Policy without unsafe-inline; job output is escaped
// before it is coloured (internal/web/ansi).
package web

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/web/ansi"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// API serves the API's routes for a principal (an *api.Server).
type API interface {
	ServeAs(p auth.Principal, w http.ResponseWriter, r *http.Request)
}

// Tokens checks admin tokens (an *auth.AdminTokens).
type Tokens interface {
	Authenticate(ctx context.Context, token string) (auth.Principal, error)
	AuthenticateHash(ctx context.Context, hash string) (auth.Principal, error)
}

// Sessions keeps dashboard sessions (a *store.DB).
type Sessions interface {
	CreateWebSession(ctx context.Context, s store.WebSession) error
	WebSessionByHash(ctx context.Context, idHash string) (store.WebSession, error)
	DeleteWebSession(ctx context.Context, idHash string) error
}

// Config configures the dashboard.
type Config struct {
	API      API
	Tokens   Tokens
	Sessions Sessions
	Log      *slog.Logger
	// SessionTTL is how long a session lasts; 0 means 12 hours.
	SessionTTL time.Duration
	// PublicURL is the orchestrator's base URL, for the webhook URLs the
	// sources page shows.
	PublicURL string
	// SecureCookie forces the Secure flag on the session cookie; it is set
	// anyway on a request that came over TLS.
	SecureCookie bool
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Handler serves the dashboard.
type Handler struct {
	cfg   Config
	pages map[string]*template.Template
	mux   *http.ServeMux
	index *logIndex
}

// Routes are the patterns the dashboard serves; the API server mounts
// them beside its own.
var Routes = []string{
	"GET /", "GET /login", "POST /login", "POST /logout",
	"GET /runs", "GET /runs/{id}", "POST /runs/{id}/cancel", "GET /runs/{id}/events",
	"GET /runs/{id}/jobs/{job}/lines", "GET /runs/{id}/jobs/{job}/outline", "GET /runs/{id}/jobs/{job}/search", "GET /runs/{id}/jobs/{job}/raw", "GET /runs/{id}/jobs/{job}/artifacts",
	"POST /runs/{id}/rerun", "POST /runs/{id}/approve",
	"GET /queue", "GET /agents", "GET /scalers", "GET /sources", "GET /peers", "GET /audit", "GET /secrets",
	"POST /agents/{id}/drain", "POST /agents/{id}/undrain", "POST /scalers/orphans/stop", "POST /sources/{name}/trigger",
	"GET /static/{file}",
}

// New returns the dashboard's handler.
func New(cfg Config) (*Handler, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, pages: map[string]*template.Template{}, mux: http.NewServeMux(), index: newLogIndex()}
	if err := h.parse(); err != nil {
		return nil, err
	}
	h.mux.HandleFunc("GET /{$}", h.root)
	h.mux.HandleFunc("GET /login", h.loginPage)
	h.mux.HandleFunc("POST /login", h.login)
	h.mux.HandleFunc("POST /logout", h.withSession(h.logout))
	h.mux.HandleFunc("GET /runs", h.withSession(h.runs))
	h.mux.HandleFunc("GET /runs/{id}", h.withSession(h.run))
	h.mux.HandleFunc("POST /runs/{id}/cancel", h.withSession(h.cancel))
	h.mux.HandleFunc("GET /runs/{id}/events", h.withSession(h.events))
	h.mux.HandleFunc("GET /runs/{id}/jobs/{job}/lines", h.withSession(h.lines))
	h.mux.HandleFunc("GET /runs/{id}/jobs/{job}/outline", h.withSession(h.outline))
	h.mux.HandleFunc("GET /runs/{id}/jobs/{job}/search", h.withSession(h.search))
	h.mux.HandleFunc("GET /runs/{id}/jobs/{job}/raw", h.withSession(h.raw))
	h.mux.HandleFunc("GET /runs/{id}/jobs/{job}/artifacts", h.withSession(h.artifacts))
	h.mux.HandleFunc("POST /runs/{id}/rerun", h.withSession(h.rerun))
	h.mux.HandleFunc("POST /runs/{id}/approve", h.withSession(h.approve))
	h.mux.HandleFunc("POST /agents/{id}/drain", h.withSession(h.drain))
	h.mux.HandleFunc("POST /agents/{id}/undrain", h.withSession(h.undrain))
	h.mux.HandleFunc("POST /scalers/orphans/stop", h.withSession(h.stopOrphan))
	h.mux.HandleFunc("POST /sources/{name}/trigger", h.withSession(h.trigger))
	h.mux.HandleFunc("GET /audit", h.withSession(h.audit))
	h.mux.HandleFunc("GET /secrets", h.withSession(h.secrets))
	h.mux.HandleFunc("GET /queue", h.withSession(h.queue))
	h.mux.HandleFunc("GET /agents", h.withSession(h.agents))
	h.mux.HandleFunc("GET /scalers", h.withSession(h.scalers))
	h.mux.HandleFunc("GET /sources", h.withSession(h.sources))
	h.mux.HandleFunc("GET /peers", h.withSession(h.peers))
	h.mux.HandleFunc("GET /static/{file}", h.static)
	h.mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { h.notFound(w, r) })
	return h, nil
}

// contentSecurityPolicy allows the dashboard's own script, styles and
// event stream, nothing inline and nothing from elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", contentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("X-Frame-Options", "DENY")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) root(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.session(r); !ok {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/runs", http.StatusSeeOther)
}

// static serves the embedded assets, cacheable: their names change with
// their content only between releases, so the cache is short.
func (h *Handler) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	data, err := fs.ReadFile(staticFS, "static/"+name)
	if name == "ansi.css" {
		data, err = []byte(ansi.CSS()), nil
	}
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(data)
}

// call serves an API request for the session's principal and decodes a
// 200 answer into out. Any other status comes back as an *apiError with
// the API's message.
func (h *Handler) call(ctx context.Context, p auth.Principal, method, path string, body any, out any) error {
	var rd *bytes.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.RemoteAddr = clientOf(ctx)
	rec := httptest.NewRecorder()
	h.cfg.API.ServeAs(p, rec, req)
	if rec.Code/100 != 2 {
		var e apiv1.Error
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(rec.Body.String())
		}
		return &apiError{Status: rec.Code, Message: e.Error}
	}
	if out == nil || rec.Code == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// apiError is an API answer other than 2xx.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Message) }

type clientKey struct{}

// clientOf is the browser's address, for the API's audit log.
func clientOf(ctx context.Context) string {
	if s, ok := ctx.Value(clientKey{}).(string); ok {
		return s
	}
	return ""
}

// fail renders an API failure as a page: a 403 says the role may not do
// it, anything else what went wrong.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, s *sessionInfo, err error) {
	var ae *apiError
	status, msg := http.StatusInternalServerError, err.Error()
	if errors.As(err, &ae) {
		status, msg = ae.Status, ae.Message
	}
	if status == http.StatusInternalServerError {
		h.cfg.Log.Error("dashboard page failed", "path", r.URL.Path, "error", err)
	}
	h.render(w, r, status, "error", s, map[string]any{"Status": status, "StatusText": http.StatusText(status), "Message": msg})
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	s, _ := h.session(r)
	h.render(w, r, http.StatusNotFound, "error", s, map[string]any{"Status": http.StatusNotFound, "StatusText": "Not Found", "Message": "no page at " + r.URL.Path})
}

// pathEscape escapes a path segment from a URL.
func pathEscape(s string) string { return url.PathEscape(s) }
