package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// QueueEntry is one row of the dispatch queue: a job waiting for an agent
// (pending) or handed to one (dispatched). The row lives until the job ends
// (Dequeue). The queue package gives these rows their meaning; the store
// only applies its guarded changes atomically.
type QueueEntry struct {
	JobID string
	RunID string
	// Labels are the labels an agent must all carry to take the job.
	Labels []string
	Status QueueStatus
	// AgentID is the agent the row is dispatched to; empty while pending.
	AgentID string
	// DispatchAttempts counts requeues.
	DispatchAttempts int
	EnqueuedAt       time.Time
	// ExpiresAt is when a pending row stops being claimable; nil is never.
	ExpiresAt *time.Time
	// AckDeadline is when a dispatch not yet acked counts as lost; nil once
	// acked or while pending.
	AckDeadline *time.Time
	// RecoveryAgentID and RecoveryDeadline are set while the job waits for
	// its disconnected agent to come back.
	RecoveryAgentID  string
	RecoveryDeadline *time.Time
	// LastProvisioningError is the last failure to provision an agent for
	// the pending row; cleared when the row is dispatched.
	LastProvisioningError string
	// LastRequeueReason says why the row was last put back to pending.
	LastRequeueReason string
	// Owner is the orchestrator instance that dispatched the row (or
	// reclaimed or took it over since) and watches its ack and recovery;
	// empty while pending.
	Owner string
	// CancelReason is set when a cancel of the job was asked for on an
	// instance that does not hold its agent (see RequestCancel); the
	// owner tells the agent. CancelForce skips the agent's grace period.
	CancelReason string
	CancelForce  bool
	UpdatedAt    time.Time
}

// NewQueueEntry is what Enqueue writes.
type NewQueueEntry struct {
	JobID  string
	RunID  string
	Labels []string
	// ExpiresAt is when the row stops being claimable; nil is never.
	ExpiresAt *time.Time
}

const queueColumns = "job_id, run_id, labels, status, agent_id, dispatch_attempts, enqueued_at, expires_at, ack_deadline, " +
	"recovery_agent_id, recovery_deadline, last_provisioning_error, last_requeue_reason, owner_instance, cancel_reason, cancel_force, updated_at"

func scanQueueEntry(row interface{ Scan(...any) error }) (QueueEntry, error) {
	var e QueueEntry
	err := row.Scan(&e.JobID, &e.RunID, jsonCol[[]string]{&e.Labels}, &e.Status, stringCol{&e.AgentID},
		&e.DispatchAttempts, timeCol{&e.EnqueuedAt}, nullTimeCol{&e.ExpiresAt}, nullTimeCol{&e.AckDeadline},
		stringCol{&e.RecoveryAgentID}, nullTimeCol{&e.RecoveryDeadline}, stringCol{&e.LastProvisioningError},
		stringCol{&e.LastRequeueReason}, stringCol{&e.Owner}, stringCol{&e.CancelReason}, boolIntCol{&e.CancelForce}, timeCol{&e.UpdatedAt})
	return e, err
}

// scanOptionalEntry scans a row that may not exist: (entry, true) if it
// does, (zero, false) if not.
func scanOptionalEntry(row *sql.Row) (QueueEntry, bool, error) {
	e, err := scanQueueEntry(row)
	if errors.Is(err, sql.ErrNoRows) {
		return QueueEntry{}, false, nil
	}
	if err != nil {
		return QueueEntry{}, false, err
	}
	return e, true, nil
}

// Enqueue adds a pending row for a job. A job already in the queue gives
// ErrConflict; a job or run that does not exist is refused by the schema.
func (q *queries) Enqueue(ctx context.Context, ne NewQueueEntry) (QueueEntry, error) {
	e := newQueueEntry(ne, q.clock.Now())
	_, err := q.exec(ctx,
		"INSERT INTO dispatch_queue ("+queueInsertColumns+") VALUES (?, ?, ?, ?, ?, ?, ?)",
		queueInsertArgs(e)...)
	if err != nil {
		return QueueEntry{}, fmt.Errorf("enqueue job %q: %w", ne.JobID, classify(err))
	}
	return e, nil
}

// queueInsertColumns are the columns a new queue row sets; queueInsertArgs
// gives their values.
const queueInsertColumns = "job_id, run_id, labels, status, enqueued_at, expires_at, updated_at"

func newQueueEntry(ne NewQueueEntry, now time.Time) QueueEntry {
	e := QueueEntry{
		JobID: ne.JobID, RunID: ne.RunID, Labels: ne.Labels, Status: QueuePending,
		EnqueuedAt: now, ExpiresAt: ne.ExpiresAt, UpdatedAt: now,
	}
	if e.Labels == nil {
		e.Labels = []string{}
	}
	if e.ExpiresAt != nil {
		e.ExpiresAt = new(normTime(*e.ExpiresAt))
	}
	return e
}

func queueInsertArgs(e QueueEntry) []any {
	return []any{e.JobID, e.RunID, stringsArg(e.Labels), string(e.Status), timeArg(e.EnqueuedAt), nullTimeArg(e.ExpiresAt),
		timeArg(e.UpdatedAt)}
}

// GetQueueEntry returns the queue row of a job, or ErrNotFound.
func (q *queries) GetQueueEntry(ctx context.Context, jobID string) (QueueEntry, error) {
	e, err := scanQueueEntry(q.queryRow(ctx, "SELECT "+queueColumns+" FROM dispatch_queue WHERE job_id = ?", jobID))
	if err != nil {
		return QueueEntry{}, fmt.Errorf("get queue entry of job %q: %w", jobID, classify(err))
	}
	return e, nil
}

// ListQueue returns every queue row, oldest first.
func (q *queries) ListQueue(ctx context.Context) ([]QueueEntry, error) {
	return q.listQueue(ctx, "list queue", "1 = 1")
}

// QueueListEntry is a queue row with the name of its job, for listings.
type QueueListEntry struct {
	QueueEntry
	JobName string
}

// QueueCursor is where a page of ListQueuePage starts: just after the row
// of job JobID, enqueued at EnqueuedAt (the last row of the page before).
type QueueCursor struct {
	EnqueuedAt time.Time
	JobID      string
}

// ListQueuePage returns up to limit queue rows after cursor (nil: from the
// first), oldest first (by enqueue time, then job id), each with its job's
// name, in one query. A row enqueued after a page was read, or requeued,
// keeps its place: the order is by enqueue time, which does not change.
func (q *queries) ListQueuePage(ctx context.Context, after *QueueCursor, limit int) ([]QueueListEntry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("list queue page: limit %d: want at least 1", limit)
	}
	where, args := "1 = 1", []any{}
	if after != nil {
		where = "(q.enqueued_at > ? OR (q.enqueued_at = ? AND q.job_id > ?))"
		args = append(args, timeArg(after.EnqueuedAt), timeArg(after.EnqueuedAt), after.JobID)
	}
	args = append(args, limit)
	rows, err := q.query(ctx,
		"SELECT "+prefixed("q.", queueColumns)+", j.name FROM dispatch_queue q JOIN jobs j ON j.id = q.job_id"+
			" WHERE "+where+" ORDER BY q.enqueued_at, q.job_id LIMIT ?", args...)
	if err != nil {
		return nil, fmt.Errorf("list queue page: %w", err)
	}
	defer rows.Close()
	out := make([]QueueListEntry, 0, min(limit, 1024))
	for rows.Next() {
		var e QueueListEntry
		err := rows.Scan(&e.JobID, &e.RunID, jsonCol[[]string]{&e.Labels}, &e.Status, stringCol{&e.AgentID},
			&e.DispatchAttempts, timeCol{&e.EnqueuedAt}, nullTimeCol{&e.ExpiresAt}, nullTimeCol{&e.AckDeadline},
			stringCol{&e.RecoveryAgentID}, nullTimeCol{&e.RecoveryDeadline}, stringCol{&e.LastProvisioningError},
			stringCol{&e.LastRequeueReason}, stringCol{&e.Owner}, stringCol{&e.CancelReason}, boolIntCol{&e.CancelForce},
			timeCol{&e.UpdatedAt}, &e.JobName)
		if err != nil {
			return nil, fmt.Errorf("list queue page: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queue page: %w", err)
	}
	return out, nil
}

// prefixed puts prefix before every name of a comma-separated column list.
func prefixed(prefix, columns string) string {
	names := strings.Split(columns, ", ")
	for i, n := range names {
		names[i] = prefix + n
	}
	return strings.Join(names, ", ")
}

// ClaimForAgent atomically takes the oldest pending, unexpired row whose
// labels are all among agentLabels, marks it dispatched to agentID with the
// given ack deadline and owned by instance owner (the orchestrator the
// agent is connected to), and clears its provisioning error. It returns false
// when no row fits. Two claimers never get the same row: on PostgreSQL the
// candidate row is locked and concurrent claimers skip it (FOR UPDATE SKIP
// LOCKED); on SQLite there is only one writer at a time. A row whose job
// its concurrency group or its matrix's max-parallel holds back is not
// taken (see concurrency.go).
func (q *queries) ClaimForAgent(ctx context.Context, owner, agentID string, agentLabels []string, ackDeadline time.Time) (QueueEntry, bool, error) {
	now := q.clock.Now()
	e, ok, err := scanOptionalEntry(q.writeRow(ctx,
		`UPDATE dispatch_queue
		 SET status = 'dispatched', agent_id = ?, ack_deadline = ?, last_provisioning_error = NULL, owner_instance = ?, updated_at = ?
		 WHERE status = 'pending' AND job_id = (
		   SELECT c.job_id FROM dispatch_queue c
		   WHERE c.status = 'pending'
		     AND (c.expires_at IS NULL OR c.expires_at > ?)
		     AND NOT EXISTS (
		       SELECT 1 FROM `+q.d.jsonTextElements("c.labels", "need")+`
		       WHERE need.value NOT IN (SELECT have.value FROM `+q.d.jsonTextElements("?", "have")+`))
		     AND `+concurrencyFree("c.job_id")+`
		   ORDER BY c.enqueued_at, c.job_id
		   LIMIT 1`+q.d.lockSkipLocked()+`)
		 RETURNING `+queueColumns,
		agentID, timeArg(ackDeadline), nullStringArg(owner), timeArg(now), timeArg(now), stringsArg(agentLabels)))
	if err == nil && ok {
		// A claim that lost its job's concurrency slot to one committed
		// meanwhile is given back; the next pass takes another row.
		ok, err = q.confirmClaim(ctx, e.JobID)
	}
	if err != nil {
		return QueueEntry{}, false, fmt.Errorf("claim a job for agent %q: %w", agentID, err)
	}
	if !ok {
		return QueueEntry{}, false, nil
	}
	return e, ok, nil
}

// ClaimJob atomically marks one given row dispatched to agentID, as
// ClaimForAgent does, if it is pending and unexpired. It is for an agent
// provisioned for that very job; checking that the agent fits is the
// caller's business. It returns false if the row is not claimable, and
// ErrNotFound if there is no row.
func (q *queries) ClaimJob(ctx context.Context, owner, jobID, agentID string, ackDeadline time.Time) (QueueEntry, bool, error) {
	now := q.clock.Now()
	e, ok, err := scanOptionalEntry(q.writeRow(ctx,
		`UPDATE dispatch_queue
		 SET status = 'dispatched', agent_id = ?, ack_deadline = ?, last_provisioning_error = NULL, owner_instance = ?, updated_at = ?
		 WHERE job_id = ? AND status = 'pending' AND (expires_at IS NULL OR expires_at > ?) AND `+concurrencyFree("?")+`
		 RETURNING `+queueColumns,
		agentID, timeArg(ackDeadline), nullStringArg(owner), timeArg(now), jobID, timeArg(now), jobID))
	if err == nil && ok {
		if ok, err = q.confirmClaim(ctx, jobID); !ok {
			e = QueueEntry{}
		}
	}
	if err == nil && !ok {
		_, err = q.guarded(ctx, false, "SELECT 1 FROM dispatch_queue WHERE job_id = ?", jobID)
	}
	if err != nil {
		return QueueEntry{}, false, fmt.Errorf("claim job %q for agent %q: %w", jobID, agentID, err)
	}
	return e, ok, nil
}

// Ack records that agentID accepted the dispatched job: it clears the ack
// deadline. It returns false if the row is not dispatched to that agent
// (a stale or foreign ack), and ErrNotFound if there is no row.
func (q *queries) Ack(ctx context.Context, jobID, agentID string) (bool, error) {
	changed, err := q.execChanged(ctx,
		`UPDATE dispatch_queue SET ack_deadline = NULL, updated_at = ?
		 WHERE job_id = ? AND status = 'dispatched' AND agent_id = ?`,
		timeArg(q.clock.Now()), jobID, agentID)
	if err == nil {
		changed, err = q.guarded(ctx, changed, "SELECT 1 FROM dispatch_queue WHERE job_id = ?", jobID)
	}
	if err != nil {
		return false, fmt.Errorf("ack job %q from agent %q: %w", jobID, agentID, err)
	}
	return changed, nil
}

// RequeueRequest says which dispatched row to put back to pending, and on
// what condition.
type RequeueRequest struct {
	JobID string
	// AgentID is the agent the row must still be dispatched to. A decision
	// taken about one dispatch must not undo a later one: between the
	// decision and the update the row may have been requeued and claimed
	// again.
	AgentID string
	// OnlyUnacked requeues only a dispatch not yet acknowledged, for
	// decisions based on a missing ack that the ack may overtake.
	OnlyUnacked bool
	// OnlyRecovering requeues only a row still waiting for its agent, for
	// decisions about a recovery window that a reconnect may settle first.
	OnlyRecovering bool
	// Reason is recorded as LastRequeueReason.
	Reason string
}

// Requeue puts a dispatched row back to pending: it clears the agent, the
// owner, the ack deadline and any recovery, adds one to DispatchAttempts and records
// the reason. It returns the row as updated, or false if the row is not
// dispatched to r.AgentID (or was acknowledged, with OnlyUnacked), and
// ErrNotFound if there is no row. Giving up after too many attempts is the
// caller's decision.
func (q *queries) Requeue(ctx context.Context, r RequeueRequest) (QueueEntry, bool, error) {
	cond := ""
	if r.OnlyUnacked {
		cond += " AND ack_deadline IS NOT NULL"
	}
	if r.OnlyRecovering {
		cond += " AND recovery_deadline IS NOT NULL"
	}
	e, ok, err := scanOptionalEntry(q.writeRow(ctx,
		`UPDATE dispatch_queue
		 SET status = 'pending', agent_id = NULL, ack_deadline = NULL, owner_instance = NULL,
		     cancel_reason = NULL, cancel_force = 0, cancel_sent_by = NULL,
		     recovery_agent_id = NULL, recovery_deadline = NULL,
		     dispatch_attempts = dispatch_attempts + 1, last_requeue_reason = ?, updated_at = ?
		 WHERE job_id = ? AND status = 'dispatched' AND agent_id = ?`+cond+`
		 RETURNING `+queueColumns,
		nullStringArg(r.Reason), timeArg(q.clock.Now()), r.JobID, r.AgentID))
	if err == nil && !ok {
		_, err = q.guarded(ctx, false, "SELECT 1 FROM dispatch_queue WHERE job_id = ?", r.JobID)
	}
	if err != nil {
		return QueueEntry{}, false, fmt.Errorf("requeue job %q: %w", r.JobID, err)
	}
	return e, ok, nil
}

// ExpiredAckDeadlines returns the dispatched rows of instance owner whose
// ack deadline is at or before now. Rows waiting in a recovery window are
// left out: their agent went away after the dispatch was sent, may have
// accepted it, and is waited for instead (see ExpiredRecoveries). Rows
// of other instances are theirs to watch: their agents are connected
// there.
func (q *queries) ExpiredAckDeadlines(ctx context.Context, owner string, now time.Time) ([]QueueEntry, error) {
	return q.listQueue(ctx, "list expired ack deadlines",
		"status = 'dispatched' AND owner_instance = ? AND ack_deadline IS NOT NULL AND ack_deadline <= ? AND recovery_deadline IS NULL",
		owner, timeArg(now))
}

// ListRecovering returns the dispatched rows waiting for agentID to come
// back.
func (q *queries) ListRecovering(ctx context.Context, agentID string) ([]QueueEntry, error) {
	return q.listQueue(ctx, "list rows recovering for agent "+strconv.Quote(agentID),
		"status = 'dispatched' AND recovery_agent_id = ?", agentID)
}

// ExpiredQueueRows returns the pending rows whose expiry is at or before
// now. ClaimForAgent no longer takes them.
func (q *queries) ExpiredQueueRows(ctx context.Context, now time.Time) ([]QueueEntry, error) {
	return q.listQueue(ctx, "list expired queue rows",
		"status = 'pending' AND expires_at IS NOT NULL AND expires_at <= ?", timeArg(now))
}

// SetRecovery starts the recovery window of a row of instance owner
// dispatched to agentID, whose agent went away: the row waits for that
// agent until deadline. It returns false if the row is not dispatched to
// agentID or is another instance's (the agent reclaimed the job there),
// and ErrNotFound if there is no row.
func (q *queries) SetRecovery(ctx context.Context, owner, jobID, agentID string, deadline time.Time) (bool, error) {
	changed, err := q.execChanged(ctx,
		`UPDATE dispatch_queue SET recovery_agent_id = ?, recovery_deadline = ?, updated_at = ?
		 WHERE job_id = ? AND status = 'dispatched' AND agent_id = ? AND owner_instance = ?`,
		agentID, timeArg(deadline), timeArg(q.clock.Now()), jobID, agentID, owner)
	if err == nil {
		changed, err = q.guarded(ctx, changed, "SELECT 1 FROM dispatch_queue WHERE job_id = ?", jobID)
	}
	if err != nil {
		return false, fmt.Errorf("set recovery of job %q for agent %q: %w", jobID, agentID, err)
	}
	return changed, nil
}

// Reclaim records that agentID, connected to instance owner, holds the
// job dispatched to it: the agent reported it in flight when it
// registered there, maybe after moving from another coordinator. The row
// becomes owner's, its recovery window ends and its ack deadline is
// cleared (the agent has the job). It returns false if the row is not
// dispatched to agentID, and ErrNotFound if there is no row.
func (q *queries) Reclaim(ctx context.Context, owner, jobID, agentID string) (bool, error) {
	changed, err := q.execChanged(ctx,
		`UPDATE dispatch_queue SET owner_instance = ?, recovery_agent_id = NULL, recovery_deadline = NULL, ack_deadline = NULL, updated_at = ?
		 WHERE job_id = ? AND status = 'dispatched' AND agent_id = ?`,
		nullStringArg(owner), timeArg(q.clock.Now()), jobID, agentID)
	if err == nil {
		changed, err = q.guarded(ctx, changed, "SELECT 1 FROM dispatch_queue WHERE job_id = ?", jobID)
	}
	if err != nil {
		return false, fmt.Errorf("reclaim job %q for agent %q: %w", jobID, agentID, err)
	}
	return changed, nil
}

// ExpiredRecoveries returns the dispatched rows of instance owner whose
// recovery deadline is at or before now.
func (q *queries) ExpiredRecoveries(ctx context.Context, owner string, now time.Time) ([]QueueEntry, error) {
	return q.listQueue(ctx, "list expired recoveries",
		"status = 'dispatched' AND owner_instance = ? AND recovery_deadline IS NOT NULL AND recovery_deadline <= ?",
		owner, timeArg(now))
}

// ListRecoveringElsewhere returns the dispatched rows waiting in a
// recovery window that instance owner does not own. An instance that
// holds such a row's agent connected (it was cut off from the database
// long enough for its rows to be taken over, but not from its agents)
// takes the row back with Reclaim.
func (q *queries) ListRecoveringElsewhere(ctx context.Context, owner string) ([]QueueEntry, error) {
	return q.listQueue(ctx, "list rows recovering for other instances",
		"status = 'dispatched' AND recovery_deadline IS NOT NULL AND (owner_instance IS NULL OR owner_instance <> ?)", owner)
}

// TakeOverOrphans makes instance self the owner of every dispatched row
// whose owner is not a live instance (its row in orchestrator_instances
// expired or is gone, or the row has no owner): a departed orchestrator's
// dispatches. Each row taken over waits for its agent, in the window it
// was already in or else until deadline, so that the agent can reclaim
// the job on any instance; then self's recovery sweep settles it. self's
// own rows are never taken (a standalone instance on SQLite is not in the
// instance table). It returns the rows taken over.
func (q *queries) TakeOverOrphans(ctx context.Context, self string, deadline time.Time) ([]QueueEntry, error) {
	now := q.clock.Now()
	rows, err := q.writeRows(ctx,
		`UPDATE dispatch_queue
		 SET owner_instance = ?, recovery_agent_id = COALESCE(recovery_agent_id, agent_id),
		     recovery_deadline = COALESCE(recovery_deadline, ?), updated_at = ?
		 WHERE status = 'dispatched' AND (owner_instance IS NULL OR (owner_instance <> ?
		   AND owner_instance NOT IN (SELECT id FROM orchestrator_instances WHERE expires_at > ?)))
		 RETURNING `+queueColumns,
		self, timeArg(deadline), timeArg(now), self, timeArg(now))
	if err != nil {
		return nil, fmt.Errorf("take over dispatches of departed instances: %w", classify(err))
	}
	defer rows.Close()
	var out []QueueEntry
	for rows.Next() {
		e, err := scanQueueEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("take over dispatches of departed instances: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("take over dispatches of departed instances: %w", classify(err))
	}
	return out, nil
}

// BoundAgents returns the ids of the agents that a job not ended is bound
// to: a queue row dispatched to the agent (agent_id) or waiting for it to
// come back (recovery_agent_id). Every queue row is of a job not ended
// (Dequeue removes it when the job ends); the statuses are checked
// anyway, so that a status added later is not taken for one.
func (q *queries) BoundAgents(ctx context.Context) (map[string]bool, error) {
	rows, err := q.query(ctx, `SELECT agent_id, recovery_agent_id FROM dispatch_queue
		WHERE status IN ('pending', 'dispatched') AND (agent_id IS NOT NULL OR recovery_agent_id IS NOT NULL)`)
	if err != nil {
		return nil, fmt.Errorf("list agents bound to jobs: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var agent, recovery string
		if err := rows.Scan(stringCol{&agent}, stringCol{&recovery}); err != nil {
			return nil, fmt.Errorf("list agents bound to jobs: %w", err)
		}
		for _, id := range []string{agent, recovery} {
			if id != "" {
				out[id] = true
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agents bound to jobs: %w", err)
	}
	return out, nil
}

// SetProvisioningError records why no agent could be provisioned for a
// pending row. It returns false if the row is not pending, and ErrNotFound
// if there is no row.
func (q *queries) SetProvisioningError(ctx context.Context, jobID, msg string) (bool, error) {
	changed, err := q.execChanged(ctx,
		`UPDATE dispatch_queue SET last_provisioning_error = ?, updated_at = ?
		 WHERE job_id = ? AND status = 'pending'`,
		nullStringArg(msg), timeArg(q.clock.Now()), jobID)
	if err == nil {
		changed, err = q.guarded(ctx, changed, "SELECT 1 FROM dispatch_queue WHERE job_id = ?", jobID)
	}
	if err != nil {
		return false, fmt.Errorf("set provisioning error of job %q: %w", jobID, err)
	}
	return changed, nil
}

// Dequeue removes the queue row of a job that has ended. It reports
// whether there was a row; removing a missing row is not an error.
func (q *queries) Dequeue(ctx context.Context, jobID string) (bool, error) {
	changed, err := q.execChanged(ctx, "DELETE FROM dispatch_queue WHERE job_id = ?", jobID)
	if err != nil {
		return false, fmt.Errorf("dequeue job %q: %w", jobID, err)
	}
	return changed, nil
}

func (q *queries) listQueue(ctx context.Context, op, where string, args ...any) ([]QueueEntry, error) {
	rows, err := q.query(ctx,
		"SELECT "+queueColumns+" FROM dispatch_queue WHERE "+where+" ORDER BY enqueued_at, job_id", args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []QueueEntry
	for rows.Next() {
		e, err := scanQueueEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}
