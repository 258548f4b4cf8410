package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Concurrency groups and matrix limits are kept in three tables (migration
// 00038). The rules (who waits, who is cancelled, who starts) are the
// scheduler's; the store keeps the memberships, locks a group for the
// transaction that decides about it, and keeps a queue row out of the
// claims while its job-level group or its matrix's max-parallel forbids a
// dispatch (see ClaimForAgent).
//
// A group is scoped to its source: the same name in two sources is two
// groups.

// GroupRef names one concurrency group: its source and its name.
type GroupRef struct {
	Source string
	Group  string
}

// RunGroupState is where a run stands in its workflow-level group.
type RunGroupState string

// Run group states.
const (
	// RunGroupApproval: the run awaits approval and is not in the group
	// yet; it enters when approved (EnterRunGroup).
	RunGroupApproval RunGroupState = "approval"
	// RunGroupWaiting: the run is in the group and its jobs are held back
	// until it starts.
	RunGroupWaiting RunGroupState = "waiting"
	// RunGroupActive: the run started; it holds the group until it ends.
	RunGroupActive RunGroupState = "active"
)

// RunGroup is a run's membership of its workflow-level concurrency group.
type RunGroup struct {
	RunID            string
	Source           string
	Group            string
	CancelInProgress bool
	State            RunGroupState
	// Seq orders the members of a group by when they entered it (1 for
	// the first); 0 while State is RunGroupApproval.
	Seq int64
	// CancelNote, when set, is the error the run ends with if it ends
	// cancelled: why its group cancelled it.
	CancelNote string
	// RunStatus is the run's status.
	RunStatus RunStatus
}

const runGroupColumns = "c.run_id, c.source, c.grp, c.cancel_in_progress, c.state, c.seq, c.cancel_note, r.status"

func scanRunGroup(row interface{ Scan(...any) error }) (RunGroup, error) {
	var g RunGroup
	err := row.Scan(&g.RunID, &g.Source, &g.Group, boolIntCol{&g.CancelInProgress}, &g.State, &g.Seq,
		stringCol{&g.CancelNote}, &g.RunStatus)
	return g, err
}

// lockConcurrencyKey locks the row of key for the rest of the
// transaction, creating it if needed: a second transaction locking the
// same key waits until the first commits, and then sees what it wrote.
func (q *queries) lockConcurrencyKey(ctx context.Context, key string) error {
	_, err := q.exec(ctx,
		`INSERT INTO concurrency_locks (lock_key, locked_at) VALUES (?, ?)
		 ON CONFLICT (lock_key) DO UPDATE SET locked_at = excluded.locked_at`,
		key, timeArg(q.clock.Now()))
	if err != nil {
		return fmt.Errorf("lock concurrency key %q: %w", key, classify(err))
	}
	return nil
}

// Lock keys. Source names never hold ':', so a key names one group.
func runGroupKey(source, group string) string { return "run:" + source + ":" + group }
func jobGroupKey(source, group string) string { return "job:" + source + ":" + group }

// PruneConcurrencyLocks deletes the lock rows no transaction has locked
// since before: those of groups no longer used. A transaction that needs
// one again creates it.
func (q *queries) PruneConcurrencyLocks(ctx context.Context, before time.Time) (int64, error) {
	res, err := q.exec(ctx, "DELETE FROM concurrency_locks WHERE locked_at < ?", timeArg(before))
	if err != nil {
		return 0, fmt.Errorf("prune concurrency locks: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune concurrency locks: %w", err)
	}
	return n, nil
}

// LockRunGroup locks the workflow-level group for the rest of tx, so that
// what tx reads of the group's members stays true until it commits. Every
// transaction that adds a member, starts one, or decides whom to cancel
// locks the group first, before it locks any run.
func (tx *Tx) LockRunGroup(ctx context.Context, g GroupRef) error {
	return tx.lockConcurrencyKey(ctx, runGroupKey(g.Source, g.Group))
}

// JoinRunGroup adds a run to its workflow-level group: in g.State
// (RunGroupApproval or RunGroupWaiting), and, when waiting, as the group's
// newest member. The caller holds the group's lock (LockRunGroup) unless
// the run awaits approval.
func (tx *Tx) JoinRunGroup(ctx context.Context, g RunGroup) (RunGroup, error) {
	if g.State == RunGroupWaiting {
		seq, err := tx.nextRunGroupSeq(ctx, g.Source, g.Group)
		if err != nil {
			return RunGroup{}, err
		}
		g.Seq = seq
	}
	_, err := tx.exec(ctx,
		`INSERT INTO run_concurrency (run_id, source, grp, cancel_in_progress, state, seq) VALUES (?, ?, ?, ?, ?, ?)`,
		g.RunID, g.Source, g.Group, boolInt(g.CancelInProgress), string(g.State), g.Seq)
	if err != nil {
		return RunGroup{}, fmt.Errorf("add run %q to concurrency group %q: %w", g.RunID, g.Group, classify(err))
	}
	return g, nil
}

func (tx *Tx) nextRunGroupSeq(ctx context.Context, source, group string) (int64, error) {
	var seq int64
	err := tx.queryRow(ctx, "SELECT COALESCE(MAX(seq), 0) + 1 FROM run_concurrency WHERE source = ? AND grp = ?", source, group).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("number the members of concurrency group %q: %w", group, err)
	}
	return seq, nil
}

// EnterRunGroup moves an approved run from RunGroupApproval to
// RunGroupWaiting, as the group's newest member, and returns its
// membership; false when the run was not awaiting approval in a group.
// The caller holds the group's lock.
func (tx *Tx) EnterRunGroup(ctx context.Context, runID string) (RunGroup, bool, error) {
	g, ok, err := tx.GetRunGroup(ctx, runID)
	if err != nil || !ok || g.State != RunGroupApproval {
		return RunGroup{}, false, err
	}
	seq, err := tx.nextRunGroupSeq(ctx, g.Source, g.Group)
	if err != nil {
		return RunGroup{}, false, err
	}
	if _, err := tx.exec(ctx, "UPDATE run_concurrency SET state = ?, seq = ? WHERE run_id = ?",
		string(RunGroupWaiting), seq, runID); err != nil {
		return RunGroup{}, false, fmt.Errorf("enter run %q in concurrency group %q: %w", runID, g.Group, err)
	}
	g.State, g.Seq = RunGroupWaiting, seq
	return g, true, nil
}

// GetRunGroup returns the run's membership of its workflow-level group;
// false when the run has none.
func (q *queries) GetRunGroup(ctx context.Context, runID string) (RunGroup, bool, error) {
	g, err := scanRunGroup(q.queryRow(ctx,
		"SELECT "+runGroupColumns+" FROM run_concurrency c JOIN runs r ON r.id = c.run_id WHERE c.run_id = ?", runID))
	if errors.Is(err, sql.ErrNoRows) {
		return RunGroup{}, false, nil
	}
	if err != nil {
		return RunGroup{}, false, fmt.Errorf("get concurrency group of run %q: %w", runID, err)
	}
	return g, true, nil
}

// ListRunGroup returns the members of a workflow-level group whose runs
// have not ended, waiting or active (not those awaiting approval), oldest
// member first.
func (q *queries) ListRunGroup(ctx context.Context, g GroupRef) ([]RunGroup, error) {
	rows, err := q.query(ctx,
		"SELECT "+runGroupColumns+` FROM run_concurrency c JOIN runs r ON r.id = c.run_id
		 WHERE c.source = ? AND c.grp = ? AND c.state IN ('waiting', 'active') AND r.status IN ('pending', 'running')
		 ORDER BY c.seq, c.run_id`, g.Source, g.Group)
	if err != nil {
		return nil, fmt.Errorf("list concurrency group %q: %w", g.Group, err)
	}
	defer rows.Close()
	var out []RunGroup
	for rows.Next() {
		m, err := scanRunGroup(rows)
		if err != nil {
			return nil, fmt.Errorf("list concurrency group %q: %w", g.Group, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list concurrency group %q: %w", g.Group, err)
	}
	return out, nil
}

// StartRunGroupMember makes a waiting member active and clears the error
// of its run (which said what it waited for) if the run is still pending.
// It reports whether the member was waiting.
func (tx *Tx) StartRunGroupMember(ctx context.Context, runID string) (bool, error) {
	changed, err := tx.execChanged(ctx, "UPDATE run_concurrency SET state = ? WHERE run_id = ? AND state = ?",
		string(RunGroupActive), runID, string(RunGroupWaiting))
	if err == nil && changed {
		_, err = tx.SetPendingRunError(ctx, runID, "")
	}
	if err != nil {
		return false, fmt.Errorf("start run %q of its concurrency group: %w", runID, err)
	}
	return changed, nil
}

// SetRunGroupCancelNote records the error the run ends with if it ends
// cancelled (see RunGroup.CancelNote).
func (tx *Tx) SetRunGroupCancelNote(ctx context.Context, runID, note string) error {
	if _, err := tx.exec(ctx, "UPDATE run_concurrency SET cancel_note = ? WHERE run_id = ?", nullStringArg(note), runID); err != nil {
		return fmt.Errorf("note why run %q is cancelled: %w", runID, err)
	}
	return nil
}

// SetPendingRunError sets the error of a run that is still pending (""
// clears it): for a run, what it waits for. It reports whether the run
// was pending.
func (tx *Tx) SetPendingRunError(ctx context.Context, runID, msg string) (bool, error) {
	changed, err := tx.execChanged(ctx, "UPDATE runs SET error = ? WHERE id = ? AND status = 'pending'", nullStringArg(msg), runID)
	if err != nil {
		return false, fmt.Errorf("set error of pending run %q: %w", runID, err)
	}
	return changed, nil
}

// RunGroupsOf returns the workflow-level groups of the given runs, each
// once.
func (q *queries) RunGroupsOf(ctx context.Context, runIDs []string) ([]GroupRef, error) {
	return q.groupsOf(ctx, "run_concurrency", "run_id", runIDs)
}

// RunGroupsWaiting returns the workflow-level groups that have a waiting
// member whose run is still pending: those a run may have to start in,
// or whose older members a newer one may have to cancel.
func (q *queries) RunGroupsWaiting(ctx context.Context) ([]GroupRef, error) {
	return q.listGroups(ctx, "list concurrency groups with waiting runs",
		`SELECT DISTINCT c.source, c.grp FROM runs r JOIN run_concurrency c ON c.run_id = r.id
		 WHERE r.status = 'pending' AND c.state = 'waiting' ORDER BY c.source, c.grp`)
}

// JobConcurrency is what limits the dispatch of one job: its job-level
// group and, for a combination of a matrix job, the matrix's fail-fast
// and max-parallel, shared with its siblings (the jobs of the run with
// the same Base).
type JobConcurrency struct {
	JobID  string
	RunID  string
	Source string
	// Group is the job-level group, "" for none.
	Group            string
	CancelInProgress bool
	// Base is the matrix job's key, "" for a job that is not a matrix
	// combination with fail-fast or max-parallel.
	Base        string
	FailFast    bool
	MaxParallel int
}

// AddJobConcurrency records the limits of jobs of one run, in the
// transaction that creates them, before any of them can be claimed.
func (tx *Tx) AddJobConcurrency(ctx context.Context, jobs []JobConcurrency) error {
	rows := make([][]any, 0, len(jobs))
	for _, j := range jobs {
		rows = append(rows, []any{j.JobID, j.RunID, j.Source, nullStringArg(j.Group), boolInt(j.CancelInProgress),
			nullStringArg(j.Base), boolInt(j.FailFast), j.MaxParallel})
	}
	if err := tx.insertRows(ctx, "job_concurrency",
		"job_id, run_id, source, grp, cancel_in_progress, base, fail_fast, max_parallel", rows); err != nil {
		return fmt.Errorf("record concurrency of jobs: %w", classify(err))
	}
	return nil
}

// JobGroupMember is a job of a job-level group that is in the queue:
// queued (Dispatched false) or handed to an agent.
type JobGroupMember struct {
	JobID            string
	RunID            string
	Job              string
	CancelInProgress bool
	Dispatched       bool
	// EnqueuedAt orders the members by when they entered the group.
	EnqueuedAt time.Time
}

// ListJobGroup returns the members of a job-level group, oldest first.
func (q *queries) ListJobGroup(ctx context.Context, g GroupRef) ([]JobGroupMember, error) {
	rows, err := q.query(ctx,
		`SELECT c.job_id, c.run_id, j.name, c.cancel_in_progress, q.status, q.enqueued_at
		 FROM job_concurrency c JOIN dispatch_queue q ON q.job_id = c.job_id JOIN jobs j ON j.id = c.job_id
		 WHERE c.source = ? AND c.grp = ?
		 ORDER BY q.enqueued_at, c.job_id`, g.Source, g.Group)
	if err != nil {
		return nil, fmt.Errorf("list job concurrency group %q: %w", g.Group, err)
	}
	defer rows.Close()
	var out []JobGroupMember
	for rows.Next() {
		var m JobGroupMember
		var st QueueStatus
		if err := rows.Scan(&m.JobID, &m.RunID, &m.Job, boolIntCol{&m.CancelInProgress}, &st, timeCol{&m.EnqueuedAt}); err != nil {
			return nil, fmt.Errorf("list job concurrency group %q: %w", g.Group, err)
		}
		m.Dispatched = st == QueueDispatched
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list job concurrency group %q: %w", g.Group, err)
	}
	return out, nil
}

// JobGroupsOf returns the job-level groups of the given jobs, each once.
func (q *queries) JobGroupsOf(ctx context.Context, jobIDs []string) ([]GroupRef, error) {
	return q.groupsOf(ctx, "job_concurrency", "job_id", jobIDs)
}

// JobGroupsContended returns the job-level groups with more than one job
// in the queue: those where a newer job may have to cancel an older one.
func (q *queries) JobGroupsContended(ctx context.Context) ([]GroupRef, error) {
	return q.listGroups(ctx, "list contended job concurrency groups",
		`SELECT c.source, c.grp FROM dispatch_queue q JOIN job_concurrency c ON c.job_id = q.job_id
		 WHERE c.grp IS NOT NULL GROUP BY c.source, c.grp HAVING COUNT(*) > 1 ORDER BY c.source, c.grp`)
}

// FailFast is a failed combination of a fail-fast matrix job with the
// siblings that have not ended.
type FailFast struct {
	RunID  string
	JobID  string
	Job    string
	Base   string
	Others []string // ids of the unfinished siblings
}

// ListFailFast returns, for the given failed jobs (nil: every failed job),
// those that are fail-fast combinations of a matrix with unfinished
// siblings in a run not ended.
func (q *queries) ListFailFast(ctx context.Context, failedJobIDs []string) ([]FailFast, error) {
	const sel = `SELECT f.run_id, f.job_id, fj.name, f.base, s.job_id
		 FROM runs r
		 JOIN job_concurrency f ON f.run_id = r.id
		 JOIN jobs fj ON fj.id = f.job_id
		 JOIN job_concurrency s ON s.run_id = f.run_id AND s.base = f.base AND s.job_id <> f.job_id
		 JOIN jobs sj ON sj.id = s.job_id
		 WHERE r.status IN ('pending', 'running') AND f.fail_fast = 1 AND fj.status = 'failure'
		   AND sj.status IN ('waiting', 'queued', 'dispatched', 'running')`
	var out []FailFast
	add := func(rows *sql.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var f FailFast
			var other string
			if err := rows.Scan(&f.RunID, &f.JobID, &f.Job, &f.Base, &other); err != nil {
				return err
			}
			if n := len(out); n > 0 && out[n-1].JobID == f.JobID {
				out[n-1].Others = append(out[n-1].Others, other)
				continue
			}
			f.Others = []string{other}
			out = append(out, f)
		}
		return rows.Err()
	}
	if failedJobIDs == nil {
		rows, err := q.query(ctx, sel+" ORDER BY f.job_id, s.job_id")
		if err == nil {
			err = add(rows)
		}
		if err != nil {
			return nil, fmt.Errorf("list failed fail-fast jobs: %w", err)
		}
		return out, nil
	}
	for chunk := range slices.Chunk(failedJobIDs, maxIDsPerQuery) {
		rows, err := q.uncached().query(ctx, sel+" AND f.job_id IN ("+placeholders(len(chunk))+") ORDER BY f.job_id, s.job_id", anys(chunk)...)
		if err == nil {
			err = add(rows)
		}
		if err != nil {
			return nil, fmt.Errorf("list failed fail-fast jobs: %w", err)
		}
	}
	return out, nil
}

// ConcurrencyWaits says, for each of the given queued jobs that its
// job-level group or its matrix's max-parallel keeps from being
// dispatched, why, in words for the queue's why_pending. Jobs free to go
// are absent.
func (q *queries) ConcurrencyWaits(ctx context.Context, jobIDs []string) (map[string]string, error) {
	out := map[string]string{}
	for chunk := range slices.Chunk(jobIDs, maxIDsPerQuery) {
		if err := q.groupWaits(ctx, chunk, out); err != nil {
			return nil, err
		}
		if err := q.matrixWaits(ctx, chunk, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (q *queries) groupWaits(ctx context.Context, ids []string, out map[string]string) error {
	rows, err := q.uncached().query(ctx,
		`SELECT g.job_id, g.grp, o.run_id, oj.name
		 FROM job_concurrency g
		 JOIN job_concurrency o ON o.source = g.source AND o.grp = g.grp AND o.job_id <> g.job_id
		 JOIN dispatch_queue oq ON oq.job_id = o.job_id AND oq.status = 'dispatched'
		 JOIN jobs oj ON oj.id = o.job_id
		 WHERE g.grp IS NOT NULL AND g.job_id IN (`+placeholders(len(ids))+`)
		 ORDER BY g.job_id, oq.enqueued_at`, anys(ids)...)
	if err != nil {
		return fmt.Errorf("list concurrency waits: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, group, run, job string
		if err := rows.Scan(&id, &group, &run, &job); err != nil {
			return fmt.Errorf("list concurrency waits: %w", err)
		}
		if _, ok := out[id]; !ok {
			out[id] = fmt.Sprintf("waiting for concurrency group %q (run %s job %s is in it)", group, run, job)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list concurrency waits: %w", err)
	}
	return nil
}

func (q *queries) matrixWaits(ctx context.Context, ids []string, out map[string]string) error {
	rows, err := q.uncached().query(ctx,
		`SELECT g.job_id, g.base, g.max_parallel, sj.name
		 FROM job_concurrency g
		 JOIN job_concurrency s ON s.run_id = g.run_id AND s.base = g.base AND s.job_id <> g.job_id
		 JOIN dispatch_queue sq ON sq.job_id = s.job_id AND sq.status = 'dispatched'
		 JOIN jobs sj ON sj.id = s.job_id
		 WHERE g.max_parallel > 0 AND g.job_id IN (`+placeholders(len(ids))+`)
		 ORDER BY g.job_id, sj.name`, anys(ids)...)
	if err != nil {
		return fmt.Errorf("list max-parallel waits: %w", err)
	}
	defer rows.Close()
	type busy struct {
		base  string
		max   int
		names []string
	}
	byJob := map[string]*busy{}
	var order []string
	for rows.Next() {
		var id, base, name string
		var max int
		if err := rows.Scan(&id, &base, &max, &name); err != nil {
			return fmt.Errorf("list max-parallel waits: %w", err)
		}
		b := byJob[id]
		if b == nil {
			b = &busy{base: base, max: max}
			byJob[id] = b
			order = append(order, id)
		}
		b.names = append(b.names, name)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list max-parallel waits: %w", err)
	}
	for _, id := range order {
		b := byJob[id]
		if _, ok := out[id]; ok || len(b.names) < b.max {
			continue
		}
		out[id] = fmt.Sprintf("waiting for a max-parallel slot: matrix job %q runs at most %d at once (in progress: %s)",
			b.base, b.max, strings.Join(b.names, ", "))
	}
	return nil
}

// concurrencyFree is an SQL condition that holds when the queue row of
// job idExpr (a column, or "?") may be dispatched now: no other job of its
// job-level group is dispatched, and fewer of its matrix siblings than its
// max-parallel are. A job without limits has no job_concurrency row and
// costs one primary-key lookup. The group test goes through the
// dispatched rows (as many as the jobs running), not through the group's
// members, which are every job the group ever had.
func concurrencyFree(idExpr string) string {
	return `NOT EXISTS (
		SELECT 1 FROM job_concurrency g
		WHERE g.job_id = ` + idExpr + ` AND (
		  (g.grp IS NOT NULL AND EXISTS (
		    SELECT 1 FROM dispatch_queue oq
		    WHERE oq.status = 'dispatched' AND oq.job_id <> g.job_id AND EXISTS (
		      SELECT 1 FROM job_concurrency o WHERE o.job_id = oq.job_id AND o.source = g.source AND o.grp = g.grp)))
		  OR (g.max_parallel > 0 AND g.max_parallel <= (
		    SELECT COUNT(*) FROM job_concurrency s JOIN dispatch_queue sq ON sq.job_id = s.job_id
		    WHERE s.run_id = g.run_id AND s.base = g.base AND s.job_id <> g.job_id AND sq.status = 'dispatched'))))`
}

// confirmClaim makes a claim of jobID just made in this transaction
// respect the job's limits against claims made at the same moment in
// other transactions: on PostgreSQL two claimers can each see the other's
// row still pending. It locks the job's group and matrix keys (in one
// order, so two claimers never wait for each other in a circle), then
// counts the dispatched jobs again, now seeing every claim committed
// before the lock was granted. When the claim breaks a limit, the row goes
// back to pending and confirmClaim returns false. The lock of a matrix is
// the job_concurrency row of its first combination, which goes with its
// run. On SQLite, which has one writer at a time, the claim's own
// condition (concurrencyFree) is exact.
func (q *queries) confirmClaim(ctx context.Context, jobID string) (bool, error) {
	if !q.d.numbered {
		return true, nil
	}
	var source, runID string
	var group, base sql.NullString
	var maxParallel int
	err := q.queryRow(ctx, "SELECT source, run_id, grp, base, max_parallel FROM job_concurrency WHERE job_id = ?", jobID).
		Scan(&source, &runID, &group, &base, &maxParallel)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read concurrency of job %q: %w", jobID, err)
	}
	matrix := maxParallel > 0 && base.Valid
	if !group.Valid && !matrix {
		return true, nil
	}
	// Always the group first, then the matrix.
	if group.Valid {
		if err := q.lockConcurrencyKey(ctx, jobGroupKey(source, group.String)); err != nil {
			return false, err
		}
	}
	if matrix {
		var first string
		err := q.queryRow(ctx, "SELECT job_id FROM job_concurrency WHERE run_id = ? AND base = ? ORDER BY job_id LIMIT 1"+q.d.lockRow(false),
			runID, base.String).Scan(&first)
		if err != nil {
			return false, fmt.Errorf("lock the matrix of job %q: %w", jobID, err)
		}
	}
	ok, err := q.exists(ctx, "SELECT 1 FROM dispatch_queue WHERE job_id = ? AND "+concurrencyFree("?"), jobID, jobID)
	if err != nil {
		return false, fmt.Errorf("check concurrency of job %q: %w", jobID, err)
	}
	if ok {
		return true, nil
	}
	_, err = q.exec(ctx,
		`UPDATE dispatch_queue SET status = 'pending', agent_id = NULL, ack_deadline = NULL, owner_instance = NULL, updated_at = ?
		 WHERE job_id = ? AND status = 'dispatched'`, timeArg(q.clock.Now()), jobID)
	if err != nil {
		return false, fmt.Errorf("give back claim of job %q: %w", jobID, err)
	}
	return false, nil
}

// maxIDsPerQuery bounds an IN list of ids.
const maxIDsPerQuery = 500

func anys(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// groupsOf returns the distinct (source, grp) of the rows of table whose
// idColumn is one of ids.
func (q *queries) groupsOf(ctx context.Context, table, idColumn string, ids []string) ([]GroupRef, error) {
	seen := map[GroupRef]bool{}
	var out []GroupRef
	for chunk := range slices.Chunk(ids, maxIDsPerQuery) {
		got, err := q.uncached().listGroups(ctx, "list concurrency groups",
			"SELECT DISTINCT source, grp FROM "+table+" WHERE grp IS NOT NULL AND "+idColumn+" IN ("+placeholders(len(chunk))+")",
			anys(chunk)...)
		if err != nil {
			return nil, err
		}
		for _, g := range got {
			if !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	return out, nil
}

func (q *queries) listGroups(ctx context.Context, op, query string, args ...any) ([]GroupRef, error) {
	rows, err := q.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []GroupRef
	for rows.Next() {
		var g GroupRef
		if err := rows.Scan(&g.Source, &g.Group); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}
