package store

import (
	"context"
	"fmt"
	"time"
)

// AgentToken is a stored agent token. Only a hash of the secret is kept;
// hashing, expiry and revocation checks are the auth package's business.
type AgentToken struct {
	// ID is empty on input to mean NewID.
	ID string
	// Hash is the token's hash, unique among tokens.
	Hash string
	// Labels are the labels an agent using the token may register with;
	// empty means any label.
	Labels []string
	// CreatedBy is the ID of the admin token that created this one, or
	// "bootstrap"; empty for tokens made before it was recorded.
	CreatedBy string
	CreatedAt time.Time
	// ExpiresAt is nil for a token that never expires.
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
}

const agentTokenColumns = "id, hash, labels, created_by, created_at, expires_at, revoked_at, last_used_at"

func scanAgentToken(row interface{ Scan(...any) error }) (AgentToken, error) {
	var t AgentToken
	err := row.Scan(&t.ID, &t.Hash, jsonCol[[]string]{&t.Labels}, &t.CreatedBy, timeCol{&t.CreatedAt},
		nullTimeCol{&t.ExpiresAt}, nullTimeCol{&t.RevokedAt}, nullTimeCol{&t.LastUsedAt})
	return t, err
}

// CreateAgentToken stores a token (ID, Hash, Labels, CreatedBy and
// ExpiresAt are used) and returns it as stored. A hash or ID that exists gives
// ErrConflict.
func (q *queries) CreateAgentToken(ctx context.Context, t AgentToken) (AgentToken, error) {
	out := AgentToken{ID: t.ID, Hash: t.Hash, Labels: t.Labels, CreatedBy: t.CreatedBy, CreatedAt: q.clock.Now()}
	if out.ID == "" {
		out.ID = NewID()
	}
	if out.Labels == nil {
		out.Labels = []string{}
	}
	if t.ExpiresAt != nil {
		out.ExpiresAt = new(normTime(*t.ExpiresAt))
	}
	_, err := q.exec(ctx,
		"INSERT INTO agent_tokens ("+agentTokenColumns+") VALUES (?, ?, ?, ?, ?, ?, NULL, NULL)",
		out.ID, out.Hash, stringsArg(out.Labels), out.CreatedBy, timeArg(out.CreatedAt), nullTimeArg(out.ExpiresAt))
	if err != nil {
		return AgentToken{}, fmt.Errorf("create agent token %q: %w", out.ID, classify(err))
	}
	return out, nil
}

// AgentTokenByHash returns the token with the given hash, revoked or
// expired ones included, or ErrNotFound.
func (q *queries) AgentTokenByHash(ctx context.Context, hash string) (AgentToken, error) {
	t, err := scanAgentToken(q.queryRow(ctx, "SELECT "+agentTokenColumns+" FROM agent_tokens WHERE hash = ?", hash))
	if err != nil {
		// Never put the hash in an error: it identifies a secret.
		return AgentToken{}, fmt.Errorf("look up agent token by hash: %w", classify(err))
	}
	return t, nil
}

// ListAgentTokens returns every token, oldest first.
func (q *queries) ListAgentTokens(ctx context.Context) ([]AgentToken, error) {
	rows, err := q.query(ctx, "SELECT "+agentTokenColumns+" FROM agent_tokens ORDER BY created_at, id")
	if err != nil {
		return nil, fmt.Errorf("list agent tokens: %w", err)
	}
	defer rows.Close()
	var out []AgentToken
	for rows.Next() {
		t, err := scanAgentToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list agent tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agent tokens: %w", err)
	}
	return out, nil
}

// RevokeAgentToken marks a token revoked at the given time. It returns
// false if the token was revoked already, and ErrNotFound if there is no
// such token.
func (q *queries) RevokeAgentToken(ctx context.Context, id string, at time.Time) (bool, error) {
	changed, err := q.execChanged(ctx,
		"UPDATE agent_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", timeArg(at), id)
	if err == nil {
		changed, err = q.guarded(ctx, changed, "SELECT 1 FROM agent_tokens WHERE id = ?", id)
	}
	if err != nil {
		return false, fmt.Errorf("revoke agent token %q: %w", id, err)
	}
	return changed, nil
}

// TouchAgentToken records that a token was used at the given time. A
// missing token gives ErrNotFound.
func (q *queries) TouchAgentToken(ctx context.Context, id string, at time.Time) error {
	changed, err := q.execChanged(ctx, "UPDATE agent_tokens SET last_used_at = ? WHERE id = ?", timeArg(at), id)
	if err == nil && !changed {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("touch agent token %q: %w", id, err)
	}
	return nil
}
