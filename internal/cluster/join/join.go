package join

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kici-dev/kici/internal/cluster/pki"
	"github.com/kici-dev/kici/internal/store"
)

// Why Join refused a worker. Each is returned wrapped; test with
// errors.Is. The API answers ErrTokenInvalid with 401, ErrTokenExpired and
// ErrTokenRevoked with 403, ErrTokenUsed with 409 and ErrBadRequest with
// 400.
var (
	// ErrTokenInvalid means no token has this id, or the secret is not
	// its secret: the two are not told apart, so that a caller without
	// the secret learns nothing about which ids exist.
	ErrTokenInvalid = errors.New("join token not recognised (unknown token id or wrong secret)")
	// ErrTokenUsed means the token was spent by an earlier join: a token
	// admits one worker, once.
	ErrTokenUsed = store.ErrJoinTokenUsed
	// ErrTokenExpired means the token's expiry has passed.
	ErrTokenExpired = store.ErrJoinTokenExpired
	// ErrTokenRevoked means an operator revoked the token.
	ErrTokenRevoked = store.ErrJoinTokenRevoked
	// ErrBadRequest means the node id or the certificate request is not
	// acceptable; the token is not spent.
	ErrBadRequest = errors.New("bad join request")
)

// unknownTokenHash is what a secret is compared with when no token has
// the id presented, so that an unknown id costs the same work as a wrong
// secret.
var unknownTokenHash = pki.HashSecret("no token has this id")

// JoinRequest is what a worker presents at its first join.
type JoinRequest struct {
	// TokenID and Secret are the id and secret parts of its join token.
	TokenID string
	Secret  string
	// NodeID is the id it joins under; CSRPEM must name it.
	NodeID string
	// CSRPEM is its certificate signing request (pki.NewCSR).
	CSRPEM []byte
}

// JoinResponse is what an admitted worker gets back.
type JoinResponse struct {
	NodeID string
	// CertificatePEM is its client certificate, valid for DefaultCertTTL.
	CertificatePEM []byte
	// CAPEM is the cluster CA certificate.
	CAPEM []byte
}

// Join admits the worker req names: it checks the token's secret against
// the stored hash in constant time, checks that the token is neither
// used, expired nor revoked, signs a client certificate for req.NodeID
// from req.CSRPEM, and spends the token for that node, once: of two joins
// racing with one token, one gets ErrTokenUsed. A refusal wraps one of
// the errors above and never holds the secret.
func (s *Service) Join(ctx context.Context, req JoinRequest) (JoinResponse, error) {
	tok, err := s.db.GetJoinToken(ctx, req.TokenID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		pki.SecretMatches(unknownTokenHash, req.Secret)
		return JoinResponse{}, ErrTokenInvalid
	case err != nil:
		return JoinResponse{}, fmt.Errorf("join: %w", err)
	case !pki.SecretMatches(tok.SecretHash, req.Secret):
		return JoinResponse{}, ErrTokenInvalid
	}
	if err := usable(tok, s.now()); err != nil {
		return JoinResponse{}, fmt.Errorf("join token %s: %w", tok.ID, err)
	}
	ca, err := s.getCA(ctx, false)
	if err != nil {
		// A token exists, so a CA was stored: it cannot be opened.
		return JoinResponse{}, fmt.Errorf("join: %w", err)
	}
	certPEM, err := ca.SignClient(req.CSRPEM, req.NodeID, s.certTTL, s.now())
	if err != nil {
		return JoinResponse{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if _, err := s.db.UseJoinToken(ctx, tok.ID, req.NodeID); err != nil {
		// Another join spent it since, or it expired meanwhile: the
		// certificate just signed is dropped.
		return JoinResponse{}, err
	}
	s.log.Info("worker joined the cluster", "token_id", tok.ID, "node_id", req.NodeID, "cert_ttl", s.certTTL)
	return JoinResponse{NodeID: req.NodeID, CertificatePEM: certPEM, CAPEM: ca.CertPEM()}, nil
}

// usable reports why tok cannot admit a worker at now, in the store's
// order (used, revoked, expired), or nil. The store checks again when the
// token is spent; this check only spares signing a certificate for a
// token that is plainly spent.
func usable(tok store.JoinToken, now time.Time) error {
	switch {
	case tok.UsedAt != nil:
		return fmt.Errorf("%w (by node %q at %s)", ErrTokenUsed, tok.UsedBy, tok.UsedAt.UTC().Format(time.RFC3339))
	case tok.RevokedAt != nil:
		return fmt.Errorf("%w (at %s)", ErrTokenRevoked, tok.RevokedAt.UTC().Format(time.RFC3339))
	case tok.ExpiresAt != nil && !now.Before(*tok.ExpiresAt):
		return fmt.Errorf("%w (at %s)", ErrTokenExpired, tok.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}
