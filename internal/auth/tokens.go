package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kici-dev/kici/internal/store"
)

// Token prefixes: they say what a token is when one turns up in a log or
// a leaked file, and let secret scanners find them.
const (
	// AdminTokenPrefix starts every admin token.
	AdminTokenPrefix = "kadm_"
	// AgentTokenPrefix starts every agent token.
	AgentTokenPrefix = "kat_"
	// displayPrefixLen is how much of a token is stored for display: the
	// prefix and 7 of its 64 hex digits.
	displayPrefixLen = 12
)

// BootstrapID is the principal ID (and the CreatedBy of what it creates)
// of the KICI_BOOTSTRAP_ADMIN_TOKEN.
const BootstrapID = "bootstrap"

// Errors of Authenticate. ErrInvalidToken is wrapped with the reason
// (unknown, revoked, expired), which goes to the audit log, never to the
// caller.
var (
	ErrMissingToken = errors.New("no admin token")
	ErrInvalidToken = errors.New("invalid admin token")
)

// HashToken is how every token is stored: the hex SHA-256 of the token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// hashesEqual compares two hex hashes in constant time.
func hashesEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// newToken returns prefix followed by 32 random bytes in hex.
func newToken(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b)
}

// NewAgentToken mints an agent token: "kat_" and 64 hex digits.
func NewAgentToken() string { return newToken(AgentTokenPrefix) }

// DisplayPrefix is the part of a token kept for display.
func DisplayPrefix(token string) string {
	if len(token) <= displayPrefixLen {
		return token
	}
	return token[:displayPrefixLen]
}

// Actor types of Principal and of audit entries.
const (
	ActorAdminToken = "admin_token"
	ActorBootstrap  = "bootstrap"
	ActorAgentToken = "agent_token"
	ActorJobToken   = "job_token"
	ActorAnonymous  = "anonymous"
)

// Principal is who made a request: an admin token or the bootstrap token.
type Principal struct {
	// Type is ActorAdminToken or ActorBootstrap.
	Type string
	// ID is the token's ID, or BootstrapID.
	ID string
	// Name is the token's name.
	Name string
	Role Role
}

// Can reports whether the principal's role has permission p.
func (p Principal) Can(perm Permission) bool { return p.Role.Can(perm) }

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, if any.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// AdminTokenStore is what AdminTokens needs of the store.
type AdminTokenStore interface {
	CreateAdminToken(ctx context.Context, t store.AdminToken) (store.AdminToken, error)
	AdminTokenByHash(ctx context.Context, hash string) (store.AdminToken, error)
	TouchAdminToken(ctx context.Context, id string, at time.Time) error
}

// AdminTokensConfig tunes AdminTokens.
type AdminTokensConfig struct {
	// Bootstrap is KICI_BOOTSTRAP_ADMIN_TOKEN, accepted as an owner; empty
	// accepts none.
	Bootstrap string
	// TouchEvery is how stale a token's last-used time may get before a
	// use writes it again; 0 means one minute. It keeps a busy client
	// from writing on every request.
	TouchEvery time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// AdminTokens checks and mints admin tokens.
type AdminTokens struct {
	db            AdminTokenStore
	bootstrapHash string // "" when there is no bootstrap token
	cfg           AdminTokensConfig
}

// NewAdminTokens returns the admin token checker.
func NewAdminTokens(db AdminTokenStore, cfg AdminTokensConfig) *AdminTokens {
	if cfg.TouchEvery <= 0 {
		cfg.TouchEvery = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := &AdminTokens{db: db, cfg: cfg}
	if cfg.Bootstrap != "" {
		t.bootstrapHash = HashToken(cfg.Bootstrap)
	}
	return t
}

// Authenticate returns who token belongs to. It fails with
// ErrMissingToken, ErrInvalidToken (wrapped with the reason), or a store
// error (the caller answers 503: failing closed).
func (t *AdminTokens) Authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, ErrMissingToken
	}
	hash := HashToken(token)
	if t.bootstrapHash != "" && hashesEqual(hash, t.bootstrapHash) {
		return Principal{Type: ActorBootstrap, ID: BootstrapID, Name: BootstrapID, Role: Owner}, nil
	}
	if !strings.HasPrefix(token, AdminTokenPrefix) {
		return Principal{}, fmt.Errorf("%w: not a %s token", ErrInvalidToken, AdminTokenPrefix)
	}
	return t.AuthenticateHash(ctx, hash)
}

// AuthenticateHash is Authenticate for a token known by its hash
// (HashToken): a dashboard session keeps the hash of the token it logged
// in with, never the token, and checks it on every request, so that a
// revoked or expired token ends its sessions at once.
func (t *AdminTokens) AuthenticateHash(ctx context.Context, hash string) (Principal, error) {
	if hash == "" {
		return Principal{}, ErrMissingToken
	}
	if t.bootstrapHash != "" && hashesEqual(hash, t.bootstrapHash) {
		return Principal{Type: ActorBootstrap, ID: BootstrapID, Name: BootstrapID, Role: Owner}, nil
	}
	row, err := t.db.AdminTokenByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, fmt.Errorf("%w: unknown token", ErrInvalidToken)
	}
	if err != nil {
		return Principal{}, err
	}
	now := t.cfg.Now()
	switch {
	case !hashesEqual(row.Hash, hash):
		return Principal{}, fmt.Errorf("%w: unknown token", ErrInvalidToken)
	case row.RevokedAt != nil:
		return Principal{}, fmt.Errorf("%w: token %s (%s) is revoked", ErrInvalidToken, row.ID, row.Name)
	case row.ExpiresAt != nil && !row.ExpiresAt.After(now):
		return Principal{}, fmt.Errorf("%w: token %s (%s) expired", ErrInvalidToken, row.ID, row.Name)
	}
	role, err := ParseRole(row.Role)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: token %s: %w", ErrInvalidToken, row.ID, err)
	}
	if row.LastUsedAt == nil || now.Sub(*row.LastUsedAt) >= t.cfg.TouchEvery {
		// Losing a last-used stamp is not worth failing the request for.
		_ = t.db.TouchAdminToken(context.WithoutCancel(ctx), row.ID, now)
	}
	return Principal{Type: ActorAdminToken, ID: row.ID, Name: row.Name, Role: role}, nil
}

// CheckTokenName checks the name of a new token: 1 to 100 printable
// characters.
func CheckTokenName(name string) error {
	if strings.TrimSpace(name) == "" {
		return errors.New("name: required, say whose or what the token is")
	}
	if utf8.RuneCountInString(name) > 100 {
		return errors.New("name: at most 100 characters")
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("name: character %q is not printable", r)
		}
	}
	return nil
}

// Create mints an admin token and stores its hash. The plaintext is
// returned only here: show it once.
func (t *AdminTokens) Create(ctx context.Context, name string, role Role, by Principal, expiresAt *time.Time) (string, store.AdminToken, error) {
	if err := CheckTokenName(name); err != nil {
		return "", store.AdminToken{}, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return "", store.AdminToken{}, err
	}
	token := newToken(AdminTokenPrefix)
	row, err := t.db.CreateAdminToken(ctx, store.AdminToken{
		Hash: HashToken(token), Prefix: DisplayPrefix(token), Name: name, Role: string(role),
		CreatedBy: by.ID, ExpiresAt: expiresAt,
	})
	if err != nil {
		return "", store.AdminToken{}, err
	}
	return token, row, nil
}
