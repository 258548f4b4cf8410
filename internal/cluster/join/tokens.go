package join

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/cluster/pki"
	"github.com/kici-dev/kici/internal/store"
)

// Bounds of a join token's lifetime.
const (
	// DefaultTokenTTL is the lifetime of a token created with ttl 0.
	DefaultTokenTTL = 24 * time.Hour
	// MaxTokenTTL is the longest lifetime a token may be given: a token
	// is for one join soon after it is made, not a standing credential.
	MaxTokenTTL = 30 * 24 * time.Hour
)

// ErrBadTTL is wrapped by CreateToken for a lifetime outside
// (0, MaxTokenTTL].
var ErrBadTTL = errors.New("join token lifetime out of range")

// TokenInfo is a stored token with its state at the time it was listed.
type TokenInfo struct {
	store.JoinToken
	// State is apiv1.JoinTokenActive, JoinTokenUsed, JoinTokenExpired or
	// JoinTokenRevoked.
	State string
}

// CreateToken issues a join token valid for ttl (0 means DefaultTokenTTL;
// more than MaxTokenTTL, or less than 0, is refused with ErrBadTTL),
// creating the cluster CA if there is none. createdBy names the admin
// token that asked. It returns the token, secret included, and when it
// expires. Only the hash of the secret is stored: the caller shows the
// token once and keeps it nowhere.
func (s *Service) CreateToken(ctx context.Context, ttl time.Duration, createdBy string) (pki.JoinToken, time.Time, error) {
	if ttl == 0 {
		ttl = DefaultTokenTTL
	}
	if ttl < 0 || ttl > MaxTokenTTL {
		return pki.JoinToken{}, time.Time{}, fmt.Errorf("%w: %s, want more than 0 and at most %s (30 days)", ErrBadTTL, ttl, MaxTokenTTL)
	}
	ca, err := s.EnsureCA(ctx)
	if err != nil {
		return pki.JoinToken{}, time.Time{}, err
	}
	tok, err := pki.NewJoinToken(ca.Hash())
	if err != nil {
		return pki.JoinToken{}, time.Time{}, err
	}
	expires := s.now().Add(ttl)
	row, err := s.db.CreateJoinToken(ctx, store.JoinToken{ID: tok.ID, SecretHash: pki.HashSecret(tok.Secret), CreatedBy: createdBy, ExpiresAt: &expires})
	if err != nil {
		return pki.JoinToken{}, time.Time{}, err
	}
	s.log.Info("join token created", "token", tok, "created_by", createdBy, "expires_at", *row.ExpiresAt)
	return tok, *row.ExpiresAt, nil
}

// ListTokens returns every join token, oldest first, with its state now.
// No secret is in it: the store has only hashes.
func (s *Service) ListTokens(ctx context.Context) ([]TokenInfo, error) {
	rows, err := s.db.ListJoinTokens(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]TokenInfo, 0, len(rows))
	for _, r := range rows {
		out = append(out, TokenInfo{JoinToken: r, State: tokenState(r, now)})
	}
	return out, nil
}

// RevokeToken makes token id unusable. Revoking a revoked token is not an
// error; an unknown one gives store.ErrNotFound (wrapped).
func (s *Service) RevokeToken(ctx context.Context, id string) error {
	changed, err := s.db.RevokeJoinToken(ctx, id)
	if err != nil {
		return err
	}
	if changed {
		s.log.Info("join token revoked", "token_id", id)
	}
	return nil
}

// tokenState is the state of t at now. A spent token stays "used" and a
// revoked one "revoked" whatever its expiry.
func tokenState(t store.JoinToken, now time.Time) string {
	switch {
	case t.UsedAt != nil:
		return apiv1.JoinTokenUsed
	case t.RevokedAt != nil:
		return apiv1.JoinTokenRevoked
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return apiv1.JoinTokenExpired
	}
	return apiv1.JoinTokenActive
}
