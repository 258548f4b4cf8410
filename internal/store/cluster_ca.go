package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Why UseJoinToken refused a token that exists. Each is returned wrapped;
// test with errors.Is. A token that does not exist gives ErrNotFound.
var (
	// ErrJoinTokenUsed means the token was spent by an earlier join.
	ErrJoinTokenUsed = errors.New("join token already used")
	// ErrJoinTokenRevoked means an operator revoked the token.
	ErrJoinTokenRevoked = errors.New("join token revoked")
	// ErrJoinTokenExpired means the token's expiry has passed, by the
	// store's clock.
	ErrJoinTokenExpired = errors.New("join token expired")
)

// ClusterCA is the stored cluster certificate authority. The store keeps
// the key as the caller sealed it and never looks inside.
type ClusterCA struct {
	// CertPEM is the CA certificate, one PEM block.
	CertPEM string
	// KeySealed is the CA's private key, sealed by the caller.
	KeySealed string
	// CreatedAt is stamped by the store.
	CreatedAt time.Time
}

// InsertClusterCA stores ca as the cluster's CA unless there is one
// already, and returns the CA stored afterwards: ca itself, or the one
// that was there first. Insert and read back run in one transaction, so
// of two coordinators that create a CA at the same moment both end up
// with the same one (the loser's is dropped).
func (db *DB) InsertClusterCA(ctx context.Context, ca ClusterCA) (ClusterCA, error) {
	if ca.CertPEM == "" || ca.KeySealed == "" {
		return ClusterCA{}, errors.New("insert cluster CA: certificate and sealed key are required")
	}
	var out ClusterCA
	err := db.Tx(ctx, func(tx *Tx) error {
		_, err := tx.exec(ctx, "INSERT INTO cluster_ca (id, cert_pem, key_sealed, created_at) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
			ca.CertPEM, ca.KeySealed, timeArg(tx.clock.Now()))
		if err != nil {
			return classify(err)
		}
		out, err = tx.GetClusterCA(ctx)
		return err
	})
	if err != nil {
		return ClusterCA{}, fmt.Errorf("insert cluster CA: %w", err)
	}
	return out, nil
}

// GetClusterCA returns the cluster's CA, or ErrNotFound before one was
// created.
func (q *queries) GetClusterCA(ctx context.Context) (ClusterCA, error) {
	var ca ClusterCA
	err := q.queryRow(ctx, "SELECT cert_pem, key_sealed, created_at FROM cluster_ca WHERE id = 1").
		Scan(&ca.CertPEM, &ca.KeySealed, timeCol{&ca.CreatedAt})
	if err != nil {
		return ClusterCA{}, fmt.Errorf("read cluster CA: %w", classify(err))
	}
	return ca, nil
}

// JoinToken is a stored join token. Only the hash of its secret is kept;
// comparing a presented secret with it is the caller's business.
type JoinToken struct {
	// ID names the token; it is not secret.
	ID string
	// SecretHash is the hash of the token's secret.
	SecretHash string
	// CreatedBy is the ID of the admin token that created it, or
	// "bootstrap".
	CreatedBy string
	// CreatedAt is stamped by the store.
	CreatedAt time.Time
	// ExpiresAt is nil for a token that does not expire.
	ExpiresAt *time.Time
	// UsedAt and UsedBy (the id of the node that joined with it) are set
	// together when the token is spent.
	UsedAt *time.Time
	UsedBy string
	// RevokedAt is set when an operator revoked the token.
	RevokedAt *time.Time
}

const joinTokenColumns = "id, secret_hash, created_by, created_at, expires_at, used_at, used_by, revoked_at"

func scanJoinToken(row interface{ Scan(...any) error }) (JoinToken, error) {
	var t JoinToken
	err := row.Scan(&t.ID, &t.SecretHash, &t.CreatedBy, timeCol{&t.CreatedAt},
		nullTimeCol{&t.ExpiresAt}, nullTimeCol{&t.UsedAt}, stringCol{&t.UsedBy}, nullTimeCol{&t.RevokedAt})
	return t, err
}

// CreateJoinToken stores a new, unused token (ID, SecretHash, CreatedBy
// and ExpiresAt are used) and returns it as stored. An ID that exists
// gives ErrConflict.
func (q *queries) CreateJoinToken(ctx context.Context, t JoinToken) (JoinToken, error) {
	if t.ID == "" || t.SecretHash == "" {
		return JoinToken{}, errors.New("create join token: id and secret hash are required")
	}
	out := JoinToken{ID: t.ID, SecretHash: t.SecretHash, CreatedBy: t.CreatedBy, CreatedAt: q.clock.Now()}
	if t.ExpiresAt != nil {
		out.ExpiresAt = new(normTime(*t.ExpiresAt))
	}
	_, err := q.exec(ctx,
		"INSERT INTO join_tokens ("+joinTokenColumns+") VALUES (?, ?, ?, ?, ?, NULL, NULL, NULL)",
		out.ID, out.SecretHash, out.CreatedBy, timeArg(out.CreatedAt), nullTimeArg(out.ExpiresAt))
	if err != nil {
		return JoinToken{}, fmt.Errorf("create join token %q: %w", out.ID, classify(err))
	}
	return out, nil
}

// GetJoinToken returns the token id, spent, revoked and expired ones
// included, or ErrNotFound.
func (q *queries) GetJoinToken(ctx context.Context, id string) (JoinToken, error) {
	t, err := scanJoinToken(q.queryRow(ctx, "SELECT "+joinTokenColumns+" FROM join_tokens WHERE id = ?", id))
	if err != nil {
		return JoinToken{}, fmt.Errorf("read join token %q: %w", id, classify(err))
	}
	return t, nil
}

// ListJoinTokens returns every token, spent, revoked and expired ones
// included, oldest first.
func (q *queries) ListJoinTokens(ctx context.Context) ([]JoinToken, error) {
	rows, err := q.query(ctx, "SELECT "+joinTokenColumns+" FROM join_tokens ORDER BY created_at, id")
	if err != nil {
		return nil, fmt.Errorf("list join tokens: %w", err)
	}
	defer rows.Close()
	var out []JoinToken
	for rows.Next() {
		t, err := scanJoinToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list join tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list join tokens: %w", err)
	}
	return out, nil
}

// UseJoinToken spends token id for the node nodeID: one guarded update
// sets used_at (the store's clock) and used_by, but only while the token
// is unused, not revoked and not expired, so of two joins racing with one
// token exactly one wins. It returns the token as spent. A token that
// cannot be spent gives, wrapped, ErrNotFound, ErrJoinTokenUsed,
// ErrJoinTokenRevoked or ErrJoinTokenExpired, checked in that order.
//
// The secret is not checked here: the caller compares it with SecretHash
// (GetJoinToken) before it spends the token.
func (db *DB) UseJoinToken(ctx context.Context, id, nodeID string) (JoinToken, error) {
	if nodeID == "" {
		return JoinToken{}, fmt.Errorf("use join token %q: node id is required", id)
	}
	var out JoinToken
	err := db.Tx(ctx, func(tx *Tx) error {
		now := tx.clock.Now()
		changed, err := tx.execChanged(ctx,
			"UPDATE join_tokens SET used_at = ?, used_by = ? WHERE id = ? AND used_at IS NULL AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
			timeArg(now), nodeID, id, timeArg(now))
		if err != nil {
			return classify(err)
		}
		out, err = scanJoinToken(tx.queryRow(ctx, "SELECT "+joinTokenColumns+" FROM join_tokens WHERE id = ?", id))
		switch {
		case err != nil:
			return classify(err)
		case changed:
			return nil
		case out.UsedAt != nil:
			return fmt.Errorf("%w (by node %q at %s)", ErrJoinTokenUsed, out.UsedBy, out.UsedAt.Format(time.RFC3339))
		case out.RevokedAt != nil:
			return fmt.Errorf("%w (at %s)", ErrJoinTokenRevoked, out.RevokedAt.Format(time.RFC3339))
		case out.ExpiresAt != nil:
			return fmt.Errorf("%w (at %s)", ErrJoinTokenExpired, out.ExpiresAt.Format(time.RFC3339))
		default:
			return errors.New("unchanged for no known reason") // the guard admits no other case
		}
	})
	if err != nil {
		return JoinToken{}, fmt.Errorf("use join token %q: %w", id, err)
	}
	return out, nil
}

// RevokeJoinToken marks token id revoked (the store's clock), so that it
// can no longer be used. It returns false if it was revoked already, and
// ErrNotFound if there is no such token. A spent token may be revoked
// too; that changes nothing for the node that joined with it.
func (q *queries) RevokeJoinToken(ctx context.Context, id string) (bool, error) {
	changed, err := q.execChanged(ctx,
		"UPDATE join_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", timeArg(q.clock.Now()), id)
	if err == nil {
		changed, err = q.guarded(ctx, changed, "SELECT 1 FROM join_tokens WHERE id = ?", id)
	}
	if err != nil {
		return false, fmt.Errorf("revoke join token %q: %w", id, err)
	}
	return changed, nil
}

// ResealClusterCA replaces the sealed key of the cluster CA (a secret key
// rotation). ErrNotFound if there is no CA.
func (q *queries) ResealClusterCA(ctx context.Context, keySealed string) error {
	changed, err := q.execChanged(ctx, "UPDATE cluster_ca SET key_sealed = ? WHERE id = 1", keySealed)
	if err != nil {
		return fmt.Errorf("re-seal cluster CA key: %w", classify(err))
	}
	if !changed {
		return fmt.Errorf("re-seal cluster CA key: %w", ErrNotFound)
	}
	return nil
}
