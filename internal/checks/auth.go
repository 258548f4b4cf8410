package checks

import (
	"context"
	"crypto/rsa"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-github/v84/github"
)

// installationTokenMargin is how long before its expiry an installation
// token is replaced: GitHub's last an hour.
const installationTokenMargin = 5 * time.Minute

// clients gives the GitHub API client to report to a repository with:
// the token's, or the GitHub App installation's for that repository.
type clients struct {
	base  *github.Client // no credentials, the API URL set
	token string

	appID int64
	key   *rsa.PrivateKey
	now   func() time.Time

	mu            sync.Mutex
	installations map[string]int64 // OWNER/NAME → installation id
	tokens        map[int64]installationToken
}

type installationToken struct {
	token   string
	expires time.Time
}

func newClients(cfg Config, now func() time.Time) (*clients, error) {
	api := cfg.APIURL
	if api == "" {
		api = DefaultAPIURL
	}
	u, err := url.Parse(strings.TrimSuffix(api, "/") + "/")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("github checks config: APIURL: got %q, want an http or https URL", api)
	}
	base := github.NewClient(httpClientOrDefault(cfg.HTTPClient))
	base.BaseURL = u
	base.UserAgent = "kici"
	c := &clients{base: base, token: cfg.Token, appID: cfg.AppID, now: now,
		installations: map[string]int64{}, tokens: map[int64]installationToken{}}
	if cfg.AppID != 0 {
		if c.key, err = jwt.ParseRSAPrivateKeyFromPEM(cfg.AppKey); err != nil {
			return nil, fmt.Errorf("github checks config: AppKey: parse the GitHub App's private key: %w", err)
		}
	}
	return c, nil
}

// forRepo returns the client to report to repo (OWNER/NAME) with.
func (c *clients) forRepo(ctx context.Context, repo string) (*github.Client, error) {
	if c.key == nil {
		return c.base.WithAuthToken(c.token), nil
	}
	tok, err := c.installationToken(ctx, repo)
	if err != nil {
		return nil, err
	}
	return c.base.WithAuthToken(tok), nil
}

// appJWT is the GitHub App's own credential: a JWT signed RS256, issued
// a minute in the past (for clock drift) and valid for nine minutes (GitHub
// takes at most ten).
func (c *clients) appJWT() (string, error) {
	now := c.now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer:    fmt.Sprint(c.appID),
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(9 * time.Minute)),
	})
	s, err := tok.SignedString(c.key)
	if err != nil {
		return "", fmt.Errorf("sign the GitHub App's JWT: %w", err)
	}
	return s, nil
}

// installationToken returns a token of the App's installation on repo,
// cached until installationTokenMargin before it expires.
func (c *clients) installationToken(ctx context.Context, repo string) (string, error) {
	c.mu.Lock()
	id, known := c.installations[repo]
	cached, ok := c.tokens[id]
	c.mu.Unlock()
	if known && ok && c.now().Add(installationTokenMargin).Before(cached.expires) {
		return cached.token, nil
	}
	signed, err := c.appJWT()
	if err != nil {
		return "", err
	}
	app := c.base.WithAuthToken(signed)
	if !known {
		owner, name, _ := strings.Cut(repo, "/")
		inst, _, err := app.Apps.FindRepositoryInstallation(ctx, owner, name)
		if err != nil {
			return "", fmt.Errorf("find the GitHub App's installation on %q: %w", repo, err)
		}
		id = inst.GetID()
	}
	it, _, err := app.Apps.CreateInstallationToken(ctx, id, nil)
	if err != nil {
		return "", fmt.Errorf("create a token of GitHub App installation %d: %w", id, err)
	}
	c.mu.Lock()
	c.installations[repo] = id
	c.tokens[id] = installationToken{token: it.GetToken(), expires: it.GetExpiresAt().Time}
	c.mu.Unlock()
	return it.GetToken(), nil
}

// httpClientOrDefault is the HTTP client of the API calls.
func httpClientOrDefault(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return &http.Client{Timeout: 30 * time.Second}
}
