package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Environment is the protection of a deployment environment, the one a
// job names with `environment:`.
type Environment struct {
	Name string
	// RequireApproval holds every job of the environment until someone
	// with run.approve approves it.
	RequireApproval bool
	// Branches are doublestar globs of the branches whose runs may deploy
	// to it; empty means any.
	Branches  []string
	UpdatedAt time.Time
	// UpdatedBy names the admin token that last set it.
	UpdatedBy string
}

const environmentColumns = "name, require_approval, branches, updated_at, updated_by"

func scanEnvironment(row interface{ Scan(...any) error }) (Environment, error) {
	var e Environment
	var branches string
	if err := row.Scan(&e.Name, &e.RequireApproval, &branches, timeCol{&e.UpdatedAt}, &e.UpdatedBy); err != nil {
		return Environment{}, err
	}
	if err := json.Unmarshal([]byte(branches), &e.Branches); err != nil {
		return Environment{}, fmt.Errorf("environment %q: branches: %w", e.Name, err)
	}
	return e, nil
}

// PutEnvironment creates or replaces the environment e.Name and returns
// it as stored.
func (q *queries) PutEnvironment(ctx context.Context, e Environment) (Environment, error) {
	if e.Branches == nil {
		e.Branches = []string{}
	}
	branches, err := json.Marshal(e.Branches)
	if err != nil {
		return Environment{}, fmt.Errorf("set environment %q: %w", e.Name, err)
	}
	e.UpdatedAt = normTime(q.clock.Now())
	_, err = q.exec(ctx,
		"INSERT INTO environments ("+environmentColumns+") VALUES (?, ?, ?, ?, ?) "+
			"ON CONFLICT (name) DO UPDATE SET require_approval = excluded.require_approval, branches = excluded.branches, "+
			"updated_at = excluded.updated_at, updated_by = excluded.updated_by",
		e.Name, e.RequireApproval, string(branches), timeArg(e.UpdatedAt), e.UpdatedBy)
	if err != nil {
		return Environment{}, fmt.Errorf("set environment %q: %w", e.Name, classify(err))
	}
	return e, nil
}

// GetEnvironment returns the environment name; ErrNotFound when it has no
// protection set.
func (q *queries) GetEnvironment(ctx context.Context, name string) (Environment, error) {
	e, err := scanEnvironment(q.queryRow(ctx, "SELECT "+environmentColumns+" FROM environments WHERE name = ?", name))
	if errors.Is(err, sql.ErrNoRows) {
		return Environment{}, fmt.Errorf("environment %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Environment{}, fmt.Errorf("environment %q: %w", name, classify(err))
	}
	return e, nil
}

// ListEnvironments returns every environment, by name.
func (q *queries) ListEnvironments(ctx context.Context) ([]Environment, error) {
	rows, err := q.query(ctx, "SELECT "+environmentColumns+" FROM environments ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list environments: %w", classify(err))
	}
	defer rows.Close()
	var out []Environment
	for rows.Next() {
		e, err := scanEnvironment(rows)
		if err != nil {
			return nil, fmt.Errorf("list environments: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list environments: %w", err)
	}
	return out, nil
}

// DeleteEnvironment removes the environment's protection; ErrNotFound if
// it has none.
func (q *queries) DeleteEnvironment(ctx context.Context, name string) error {
	changed, err := q.execChanged(ctx, "DELETE FROM environments WHERE name = ?", name)
	if err == nil && !changed {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete environment %q: %w", name, classify(err))
	}
	return nil
}

// Approval states of a job held for its environment.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
)

// JobApproval is a job held for its environment's approval.
type JobApproval struct {
	JobID     string
	RunID     string
	State     string
	DecidedBy string
	CreatedAt time.Time
	DecidedAt *time.Time
}

// HoldForApproval records that the job waits for an approval; it reports
// false when the job already has a record (pending or approved).
func (q *queries) HoldForApproval(ctx context.Context, jobID, runID string) (bool, error) {
	changed, err := q.execChanged(ctx,
		"INSERT INTO job_approvals (job_id, run_id, state, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING",
		jobID, runID, ApprovalPending, timeArg(normTime(q.clock.Now())))
	if err != nil {
		return false, fmt.Errorf("hold job %q for approval: %w", jobID, classify(err))
	}
	return changed, nil
}

// ApproveJob moves the job's pending approval to approved; it reports
// false when the job has no pending approval.
func (q *queries) ApproveJob(ctx context.Context, jobID, by string) (bool, error) {
	now := normTime(q.clock.Now())
	changed, err := q.execChanged(ctx,
		"UPDATE job_approvals SET state = ?, decided_by = ?, decided_at = ? WHERE job_id = ? AND state = ?",
		ApprovalApproved, by, timeArg(now), jobID, ApprovalPending)
	if err != nil {
		return false, fmt.Errorf("approve job %q: %w", jobID, classify(err))
	}
	return changed, nil
}

// ListJobApprovals returns the approval records of a run's jobs.
func (q *queries) ListJobApprovals(ctx context.Context, runID string) ([]JobApproval, error) {
	rows, err := q.query(ctx, "SELECT job_id, run_id, state, decided_by, created_at, decided_at FROM job_approvals WHERE run_id = ? ORDER BY created_at, job_id", runID)
	if err != nil {
		return nil, fmt.Errorf("list job approvals: %w", classify(err))
	}
	defer rows.Close()
	var out []JobApproval
	for rows.Next() {
		var a JobApproval
		if err := rows.Scan(&a.JobID, &a.RunID, &a.State, &a.DecidedBy, timeCol{&a.CreatedAt}, nullTimeCol{&a.DecidedAt}); err != nil {
			return nil, fmt.Errorf("list job approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list job approvals: %w", err)
	}
	return out, nil
}
