package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// AuditEntry is one row of the audit log: who did (or tried) what to
// what, and how it ended.
type AuditEntry struct {
	// ID is set by InsertAudit; IDs of later entries sort higher.
	ID        string
	CreatedAt time.Time
	// ActorType is admin_token, bootstrap, agent_token, job_token,
	// anonymous or system.
	ActorType string
	// ActorID and ActorName identify the token (empty for anonymous).
	ActorID   string
	ActorName string
	// Role is the admin token's role, if any.
	Role string
	// Action names what was attempted, e.g. "secret.set".
	Action string
	// Target is what it was attempted on, e.g. "secret:DEPLOY_TOKEN".
	Target string
	// Outcome is allowed, denied or failed.
	Outcome string
	// Status is the HTTP status of the answer, or 0 (WebSocket refusals).
	Status int
	// Detail says more, in words: why it was denied or failed.
	Detail string
	// ClientAddr is the caller's network address.
	ClientAddr string
}

const auditColumns = "id, created_at, actor_type, actor_id, actor_name, role, action, target, outcome, status, detail, client_addr"

// InsertAudit appends an entry; ID and CreatedAt are set by the store and
// returned.
func (q *queries) InsertAudit(ctx context.Context, e AuditEntry) (AuditEntry, error) {
	e.ID = NewID()
	e.CreatedAt = q.clock.Now()
	_, err := q.exec(ctx, "INSERT INTO audit_log ("+auditColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		e.ID, timeArg(e.CreatedAt), e.ActorType, e.ActorID, e.ActorName, e.Role, e.Action, e.Target, e.Outcome,
		e.Status, e.Detail, e.ClientAddr)
	if err != nil {
		return AuditEntry{}, fmt.Errorf("insert audit entry %q: %w", e.Action, err)
	}
	return e, nil
}

// AuditFilter selects audit entries; zero fields select everything.
type AuditFilter struct {
	// ActorID, Action (exact, or a prefix ending in "."), Outcome select
	// by equality.
	ActorID string
	Action  string
	Outcome string
	// Since keeps entries created at or after it.
	Since time.Time
	// Before keeps entries older than the entry with this ID (a cursor).
	Before string
	// Limit bounds the result; 0 means 100.
	Limit int
}

// ListAudit returns matching entries, newest first.
func (q *queries) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	var where []string
	var args []any
	if f.ActorID != "" {
		where, args = append(where, "actor_id = ?"), append(args, f.ActorID)
	}
	if f.Action != "" {
		if strings.HasSuffix(f.Action, ".") {
			where, args = append(where, "substr(action, 1, ?) = ?"), append(args, len(f.Action), f.Action)
		} else {
			where, args = append(where, "action = ?"), append(args, f.Action)
		}
	}
	if f.Outcome != "" {
		where, args = append(where, "outcome = ?"), append(args, f.Outcome)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, timeArg(f.Since))
	}
	if f.Before != "" {
		where = append(where, "(created_at, id) < (SELECT created_at, id FROM audit_log WHERE id = ?)")
		args = append(args, f.Before)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	query := "SELECT " + auditColumns + " FROM audit_log"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY created_at DESC, id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := q.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.ID, timeCol{&e.CreatedAt}, &e.ActorType, &e.ActorID, &e.ActorName, &e.Role, &e.Action,
			&e.Target, &e.Outcome, &e.Status, &e.Detail, &e.ClientAddr); err != nil {
			return nil, fmt.Errorf("list audit entries: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	return out, nil
}
