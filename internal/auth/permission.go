package auth

import (
	"fmt"
	"slices"
)

// Permission is one thing an admin token may be allowed to do. Every API
// route that takes an admin token declares the one permission it needs.
type Permission string

// The permissions. The names are those of the reference orchestrator's
// RBAC (operator.md §7.1), with its later additions (scaler.read,
// scaler.manage, peer.manage), plus run.trigger, which kici adds for
// starting runs by hand (the reference left trigger routes unchecked), and
// run.approve, for starting a fork's pull request run with secrets.
// Some guard features kici does not have yet; they are listed so that
// roles are complete when those features arrive.
const (
	ContextCreate       Permission = "context.create"         // register sources
	ContextRead         Permission = "context.read"           // list sources
	ContextUpdate       Permission = "context.update"         // change sources
	ContextDelete       Permission = "context.delete"         // remove sources
	SecretRead          Permission = "secret.read"            // list secret names and metadata
	SecretWrite         Permission = "secret.write"           // set secrets
	SecretDelete        Permission = "secret.delete"          // delete secrets
	SecretReveal        Permission = "secret.reveal"          // read secret values (no route does)
	AuditRead           Permission = "audit.read"             // read the audit log
	TokenManage         Permission = "token.manage"           // admin and agent tokens
	KeyRotate           Permission = "key.rotate"             // rotate the secret key
	RunRead             Permission = "run.read"               // runs, jobs, logs, events, the queue
	RunCancel           Permission = "run.cancel"             // cancel runs
	RunTrigger          Permission = "run.trigger"            // trigger and rerun runs (kici's addition)
	RunApprove          Permission = "run.approve"            // start a fork's run that awaits approval, with secrets (kici's addition)
	EventLogRead        Permission = "event_log.read"         // webhook delivery metadata
	EventLogReadPayload Permission = "event_log.read_payload" // webhook payload bodies
	AccessLogRead       Permission = "access_log.read"        // the access log
	ScheduledJobTrigger Permission = "scheduled_job.trigger"  // run a scheduled job now
	EventDLQRead        Permission = "event_dlq.read"         // dead-lettered events
	EventDLQManage      Permission = "event_dlq.manage"       // retry or discard them
	AttestationRetry    Permission = "attestation.retry"      // re-arm attestation work
	OrchestratorDrain   Permission = "orchestrator.drain"     // drain a node
	CITrustRead         Permission = "ci_trust.read"          // read trust policies
	CITrustAdmin        Permission = "ci_trust.admin"         // change trust policies
	ScalerRead          Permission = "scaler.read"            // scaler status, live compute, connected agents
	ScalerManage        Permission = "scaler.manage"          // reload scalers, stop untracked compute
	PeerManage          Permission = "peer.manage"            // forget departed cluster peers
	TestRunTrigger      Permission = "test_run.trigger"       // start remote test runs
	TestRunRead         Permission = "test_run.read"          // follow remote test runs
)

// Permissions lists every permission, in the order of the table above.
var Permissions = []Permission{
	ContextCreate, ContextRead, ContextUpdate, ContextDelete,
	SecretRead, SecretWrite, SecretDelete, SecretReveal,
	AuditRead, TokenManage, KeyRotate,
	RunRead, RunCancel, RunTrigger, RunApprove,
	EventLogRead, EventLogReadPayload, AccessLogRead, ScheduledJobTrigger,
	EventDLQRead, EventDLQManage, AttestationRetry, OrchestratorDrain,
	CITrustRead, CITrustAdmin, ScalerRead, ScalerManage, PeerManage,
	TestRunTrigger, TestRunRead,
}

// Valid reports whether p is one of Permissions.
func (p Permission) Valid() bool { return slices.Contains(Permissions, p) }

// Role is what an admin token may do: exactly one per token.
type Role string

// The roles. They are fixed: a role's permissions are code, not data.
const (
	// Owner may do everything.
	Owner Role = "owner"
	// Admin may do everything except manage tokens and rotate the key.
	Admin Role = "admin"
	// Auditor may only read, and never secrets.
	Auditor Role = "auditor"
)

// Roles lists the roles, most powerful first.
var Roles = []Role{Owner, Admin, Auditor}

// auditorPermissions are the read-only permissions of the auditor role.
var auditorPermissions = []Permission{
	ContextRead, AuditRead, RunRead, EventLogRead, AccessLogRead, EventDLQRead, ScalerRead, TestRunRead,
}

// ParseRole checks that s names a role.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !slices.Contains(Roles, r) {
		return "", fmt.Errorf("role %q: want owner, admin or auditor", s)
	}
	return r, nil
}

// Can reports whether the role has permission p.
func (r Role) Can(p Permission) bool {
	if !p.Valid() {
		return false
	}
	switch r {
	case Owner:
		return true
	case Admin:
		return p != TokenManage && p != KeyRotate
	case Auditor:
		return slices.Contains(auditorPermissions, p)
	}
	return false
}

// Permissions returns the role's permissions, in the order of Permissions.
func (r Role) Permissions() []Permission {
	var out []Permission
	for _, p := range Permissions {
		if r.Can(p) {
			out = append(out, p)
		}
	}
	return out
}
