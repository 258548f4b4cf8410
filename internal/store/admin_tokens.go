package store

import (
	"context"
	"fmt"
	"time"
)

// AdminToken is a stored admin (API) token. Only a hash of the secret is
// kept; hashing, roles, expiry and revocation checks are the auth
// package's business.
type AdminToken struct {
	// ID is empty on input to mean NewID.
	ID string
	// Hash is the token's hash, unique among tokens.
	Hash string
	// Prefix is the start of the token, kept for display.
	Prefix string
	// Name says whose or what the token is.
	Name string
	// Role is owner, admin or auditor.
	Role string
	// CreatedBy is the ID of the token that created this one, or
	// "bootstrap".
	CreatedBy string
	CreatedAt time.Time
	// ExpiresAt is nil for a token that never expires.
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
}

const adminTokenColumns = "id, hash, prefix, name, role, created_by, created_at, expires_at, revoked_at, last_used_at"

func scanAdminToken(row interface{ Scan(...any) error }) (AdminToken, error) {
	var t AdminToken
	err := row.Scan(&t.ID, &t.Hash, &t.Prefix, &t.Name, &t.Role, &t.CreatedBy, timeCol{&t.CreatedAt},
		nullTimeCol{&t.ExpiresAt}, nullTimeCol{&t.RevokedAt}, nullTimeCol{&t.LastUsedAt})
	return t, err
}

// CreateAdminToken stores a token (ID, Hash, Prefix, Name, Role,
// CreatedBy and ExpiresAt are used) and returns it as stored. A hash or ID
// that exists gives ErrConflict.
func (q *queries) CreateAdminToken(ctx context.Context, t AdminToken) (AdminToken, error) {
	out := AdminToken{ID: t.ID, Hash: t.Hash, Prefix: t.Prefix, Name: t.Name, Role: t.Role, CreatedBy: t.CreatedBy, CreatedAt: q.clock.Now()}
	if out.ID == "" {
		out.ID = NewID()
	}
	if t.ExpiresAt != nil {
		out.ExpiresAt = new(normTime(*t.ExpiresAt))
	}
	_, err := q.exec(ctx,
		"INSERT INTO admin_tokens ("+adminTokenColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
		out.ID, out.Hash, out.Prefix, out.Name, out.Role, out.CreatedBy, timeArg(out.CreatedAt), nullTimeArg(out.ExpiresAt))
	if err != nil {
		return AdminToken{}, fmt.Errorf("create admin token %q: %w", out.ID, classify(err))
	}
	return out, nil
}

// AdminTokenByHash returns the token with the given hash, revoked or
// expired ones included, or ErrNotFound.
func (q *queries) AdminTokenByHash(ctx context.Context, hash string) (AdminToken, error) {
	t, err := scanAdminToken(q.queryRow(ctx, "SELECT "+adminTokenColumns+" FROM admin_tokens WHERE hash = ?", hash))
	if err != nil {
		// Never put the hash in an error: it identifies a secret.
		return AdminToken{}, fmt.Errorf("look up admin token by hash: %w", classify(err))
	}
	return t, nil
}

// ListAdminTokens returns every token, revoked ones included, oldest
// first.
func (q *queries) ListAdminTokens(ctx context.Context) ([]AdminToken, error) {
	rows, err := q.query(ctx, "SELECT "+adminTokenColumns+" FROM admin_tokens ORDER BY created_at, id")
	if err != nil {
		return nil, fmt.Errorf("list admin tokens: %w", err)
	}
	defer rows.Close()
	var out []AdminToken
	for rows.Next() {
		t, err := scanAdminToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list admin tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list admin tokens: %w", err)
	}
	return out, nil
}

// RevokeAdminToken marks a token revoked at the given time. It returns
// false if the token was revoked already, and ErrNotFound if there is no
// such token.
func (q *queries) RevokeAdminToken(ctx context.Context, id string, at time.Time) (bool, error) {
	changed, err := q.execChanged(ctx,
		"UPDATE admin_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", timeArg(at), id)
	if err == nil {
		changed, err = q.guarded(ctx, changed, "SELECT 1 FROM admin_tokens WHERE id = ?", id)
	}
	if err != nil {
		return false, fmt.Errorf("revoke admin token %q: %w", id, err)
	}
	return changed, nil
}

// TouchAdminToken records that a token was used at the given time. A
// missing token gives ErrNotFound.
func (q *queries) TouchAdminToken(ctx context.Context, id string, at time.Time) error {
	changed, err := q.execChanged(ctx, "UPDATE admin_tokens SET last_used_at = ? WHERE id = ?", timeArg(at), id)
	if err == nil && !changed {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("touch admin token %q: %w", id, err)
	}
	return nil
}
