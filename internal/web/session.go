package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/store"
)

// cookieName is the session cookie.
const cookieName = "kici_session"

// maxFormBody bounds a form the dashboard reads.
const maxFormBody = 16 << 10

// sessionInfo is a request's session: who it is, and the CSRF token its
// forms carry.
type sessionInfo struct {
	Principal auth.Principal
	CSRF      string
	idHash    string
}

// Can reports whether the session's role has permission p (templates
// use it to leave out what the role may not do).
func (s *sessionInfo) Can(p string) bool { return s != nil && s.Principal.Can(auth.Permission(p)) }

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// session returns the request's session if its cookie names a live one
// whose admin token is still valid.
func (h *Handler) session(r *http.Request) (*sessionInfo, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return nil, false
	}
	idHash := hashID(c.Value)
	s, err := h.cfg.Sessions.WebSessionByHash(r.Context(), idHash)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			h.cfg.Log.Error("read dashboard session", "error", err)
		}
		return nil, false
	}
	p, err := h.cfg.Tokens.AuthenticateHash(r.Context(), s.TokenHash)
	if err != nil {
		// Revoked or expired token: its sessions end with it.
		_ = h.cfg.Sessions.DeleteWebSession(context.WithoutCancel(r.Context()), idHash)
		return nil, false
	}
	return &sessionInfo{Principal: p, CSRF: s.CSRF, idHash: idHash}, true
}

// withSession serves next for a request with a session; without one a
// page redirects to /login and a form post gets 401. A post must carry
// the session's CSRF token (403 otherwise).
func (h *Handler) withSession(next func(http.ResponseWriter, *http.Request, *sessionInfo)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.session(r)
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/login?next="+pathEscape(r.URL.Path), http.StatusSeeOther)
				return
			}
			h.render(w, r, http.StatusUnauthorized, "error", nil, map[string]any{"Status": http.StatusUnauthorized, "StatusText": "Unauthorized", "Message": "log in first"})
			return
		}
		// Logout needs no CSRF token: the worst a forged one does is end a
		// session, and the SameSite=Strict cookie is not sent cross-site
		// anyway.
		if r.Method == http.MethodPost && r.URL.Path != "/logout" {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
			got := r.PostFormValue("csrf")
			if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) != 1 {
				h.render(w, r, http.StatusForbidden, "error", s, map[string]any{"Status": http.StatusForbidden, "StatusText": "Forbidden",
					"Message": "this form has no valid CSRF token: reload the page and try again"})
				return
			}
		}
		r = r.WithContext(context.WithValue(r.Context(), clientKey{}, r.RemoteAddr))
		next(w, r, s)
	}
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.session(r); ok {
		http.Redirect(w, r, "/runs", http.StatusSeeOther)
		return
	}
	h.render(w, r, http.StatusOK, "login", nil, map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

// safeNext keeps a redirect target on this site: a path, not a URL.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/runs"
	}
	return next
}

// login takes an admin token from the form, and on success starts a
// session and redirects to the page asked for (/runs by default).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.URL.Query().Get("next"))
	p, err := h.cfg.Tokens.Authenticate(r.Context(), token)
	if err != nil {
		status, msg := http.StatusUnauthorized, "that admin token is not valid (missing, unknown, revoked or expired)"
		if !errors.Is(err, auth.ErrMissingToken) && !errors.Is(err, auth.ErrInvalidToken) {
			status, msg = http.StatusServiceUnavailable, "tokens cannot be checked right now; see the orchestrator log"
			h.cfg.Log.Error("dashboard login: token check failed", "error", err)
		}
		h.cfg.Log.Warn("dashboard login refused", "client", r.RemoteAddr)
		h.render(w, r, status, "login", nil, map[string]any{"Next": next, "Error": msg})
		return
	}
	id, err := randomToken()
	csrf, err2 := randomToken()
	if err != nil || err2 != nil {
		http.Error(w, "no randomness", http.StatusInternalServerError)
		return
	}
	now := h.cfg.Now()
	if err := h.cfg.Sessions.CreateWebSession(r.Context(), store.WebSession{IDHash: hashID(id), TokenHash: auth.HashToken(token), CSRF: csrf,
		CreatedAt: now, ExpiresAt: now.Add(h.cfg.SessionTTL)}); err != nil {
		h.cfg.Log.Error("dashboard login: store the session", "error", err)
		h.render(w, r, http.StatusServiceUnavailable, "login", nil, map[string]any{"Next": next, "Error": "the session could not be stored; see the orchestrator log"})
		return
	}
	h.cfg.Log.Info("dashboard login", "token", p.Name, "role", p.Role, "client", r.RemoteAddr)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: h.cfg.SecureCookie || r.TLS != nil, MaxAge: int(h.cfg.SessionTTL.Seconds())})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	if err := h.cfg.Sessions.DeleteWebSession(r.Context(), s.idHash); err != nil {
		h.cfg.Log.Error("dashboard logout", "error", err)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: h.cfg.SecureCookie || r.TLS != nil, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
