package githubfake

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// installationID is the id of the App's installation on every repository.
const installationID = 1

// installationTokenTTL is how long an installation token is valid, as on
// GitHub.
const installationTokenTTL = time.Hour

// EnableApp makes the fake serve GitHub App authentication for app id,
// whose JWTs are signed with the private key of pub: with such a JWT,
// GET /repos/{owner}/{repo}/installation answers the installation and
// POST /app/installations/{id}/access_tokens mints an installation token
// (valid an hour), which the other endpoints then accept like the
// server's token.
func (s *Server) EnableApp(id int64, pub *rsa.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appID, s.appKey = id, pub
}

// InstallationTokens returns how many installation tokens were minted.
func (s *Server) InstallationTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.installTokens)
}

// appEndpoint reports whether path is one a GitHub App calls with its JWT.
func appEndpoint(path string) bool {
	return strings.HasPrefix(path, "/app/") || strings.HasSuffix(path, "/installation")
}

// authorized reports whether auth (an Authorization header) may call path.
func (s *Server) authorized(auth, path string) bool {
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		tok, ok = strings.CutPrefix(auth, "token ")
	}
	if !ok {
		return false
	}
	s.mu.Lock()
	appKey, appID := s.appKey, s.appID
	expires, minted := s.installTokens[tok]
	s.mu.Unlock()
	if appEndpoint(path) {
		return appKey != nil && s.validJWT(tok, appID, appKey)
	}
	return tok == s.token || (minted && time.Now().Before(expires))
}

// validJWT checks an App's JWT as GitHub does: RS256 by the App's key,
// issued by its id, expiring within ten minutes.
func (s *Server) validJWT(tok string, appID int64, key *rsa.PublicKey) bool {
	claims := jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return key, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(strconv.FormatInt(appID, 10)), jwt.WithExpirationRequired())
	if err != nil || claims.IssuedAt == nil {
		return false
	}
	return claims.ExpiresAt.Sub(claims.IssuedAt.Time) <= 10*time.Minute+time.Minute
}

func (s *Server) repoInstallation(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	r := s.repos[req.PathValue("owner")+"/"+req.PathValue("repo")]
	appID := s.appID
	s.mu.Unlock()
	if r == nil {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": installationID, "app_id": appID, "app_slug": "kici", "target_type": "Organization",
		"account":              map[string]any{"login": req.PathValue("owner"), "id": 1, "type": "Organization"},
		"access_tokens_url":    s.URL + "/app/installations/" + strconv.Itoa(installationID) + "/access_tokens",
		"repository_selection": "all",
		"permissions":          map[string]string{"checks": "write", "contents": "read", "metadata": "read", "pull_requests": "read"},
	})
}

func (s *Server) createInstallationToken(w http.ResponseWriter, req *http.Request) {
	if req.PathValue("id") != strconv.Itoa(installationID) {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := "ghs_" + hex.EncodeToString(b)
	expires := time.Now().Add(installationTokenTTL).UTC().Truncate(time.Second)
	s.mu.Lock()
	s.installTokens[tok] = expires
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"token": tok, "expires_at": expires.Format(time.RFC3339),
		"permissions":          map[string]string{"checks": "write", "contents": "read", "metadata": "read", "pull_requests": "read"},
		"repository_selection": "all",
	})
}
