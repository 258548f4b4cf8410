package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// WebSession is a dashboard session. IDHash is the SHA-256 (hex) of the
// random id the browser's cookie holds; TokenHash the hash of the admin
// token it logged in with, re-checked on every request.
type WebSession struct {
	IDHash    string
	TokenHash string
	CSRF      string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// maxWebSessions bounds the sessions kept: past it, the oldest go first.
const maxWebSessions = 10000

// CreateWebSession stores a new session, dropping the expired ones and,
// past maxWebSessions, the oldest, so that logins cannot grow the table
// without bound.
func (db *DB) CreateWebSession(ctx context.Context, s WebSession) error {
	err := db.Tx(ctx, func(tx *Tx) error {
		now := normTime(tx.clock.Now())
		if _, err := tx.exec(ctx, "DELETE FROM web_sessions WHERE expires_at <= ?", timeArg(now)); err != nil {
			return classify(err)
		}
		// Keep the newest maxWebSessions-1, making room for this one.
		keep := "LIMIT -1 OFFSET ?" // SQLite
		if tx.d.numbered {
			keep = "OFFSET ?" // PostgreSQL
		}
		if _, err := tx.exec(ctx, "DELETE FROM web_sessions WHERE id_hash IN (SELECT id_hash FROM web_sessions ORDER BY created_at DESC "+keep+")", maxWebSessions-1); err != nil {
			return classify(err)
		}
		_, err := tx.exec(ctx, "INSERT INTO web_sessions (id_hash, token_hash, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
			s.IDHash, s.TokenHash, s.CSRF, timeArg(normTime(s.CreatedAt)), timeArg(normTime(s.ExpiresAt)))
		return classify(err)
	})
	if err != nil {
		return fmt.Errorf("create web session: %w", err)
	}
	return nil
}

// WebSessionByHash returns a session that has not expired; ErrNotFound
// otherwise.
func (db *DB) WebSessionByHash(ctx context.Context, idHash string) (WebSession, error) {
	var s WebSession
	err := db.r.QueryRowContext(ctx, db.d.rebind("SELECT id_hash, token_hash, csrf, created_at, expires_at FROM web_sessions WHERE id_hash = ? AND expires_at > ?"),
		idHash, timeArg(normTime(db.clock.Now()))).Scan(&s.IDHash, &s.TokenHash, &s.CSRF, timeCol{&s.CreatedAt}, timeCol{&s.ExpiresAt})
	if errors.Is(err, sql.ErrNoRows) {
		return WebSession{}, fmt.Errorf("web session: %w", ErrNotFound)
	}
	if err != nil {
		return WebSession{}, fmt.Errorf("web session: %w", classify(err))
	}
	return s, nil
}

// DeleteWebSession ends a session (logout); an unknown one is not an
// error.
func (db *DB) DeleteWebSession(ctx context.Context, idHash string) error {
	if _, err := db.exec(ctx, "DELETE FROM web_sessions WHERE id_hash = ?", idHash); err != nil {
		return fmt.Errorf("delete web session: %w", classify(err))
	}
	return nil
}
