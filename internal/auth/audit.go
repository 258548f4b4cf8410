package auth

import (
	"context"
	"log/slog"
	"time"

	"github.com/kici-dev/kici/internal/store"
)

// Outcomes of audit entries.
const (
	OutcomeAllowed = "allowed" // the action was done
	OutcomeDenied  = "denied"  // authentication or authorisation refused it
	OutcomeFailed  = "failed"  // it was allowed but did not succeed
)

// AuditStore is what AuditLog needs of the store.
type AuditStore interface {
	InsertAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error)
}

// AuditLog writes the audit log: every mutation and every denied request.
// A write that fails is logged and otherwise ignored, so that a full disk
// does not also take the API down; the failure is in the orchestrator's
// log instead.
type AuditLog struct {
	log *slog.Logger
	db  AuditStore
}

// NewAuditLog returns an audit log writer.
func NewAuditLog(logger *slog.Logger, db AuditStore) *AuditLog {
	return &AuditLog{log: logger, db: db}
}

// auditWriteTimeout bounds one audit write, which runs even after the
// request's context ends.
const auditWriteTimeout = 10 * time.Second

// Record appends e to the audit log.
func (a *AuditLog) Record(ctx context.Context, e store.AuditEntry) {
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditWriteTimeout)
	defer cancel()
	if _, err := a.db.InsertAudit(ctx, e); err != nil {
		a.log.Error("audit write failed", "action", e.Action, "actor_id", e.ActorID, "outcome", e.Outcome, "error", err)
	}
}

// Actor fills in e's actor fields from p.
func (p Principal) Actor(e store.AuditEntry) store.AuditEntry {
	e.ActorType, e.ActorID, e.ActorName, e.Role = p.Type, p.ID, p.Name, string(p.Role)
	return e
}
