package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// CheckState is how far a run's GitHub check run has got. The states only
// move forward: a report never takes a check run back.
type CheckState int

// The states of a check run, in order. CheckNone is "nothing reported yet"
// and is never desired. CheckActionRequired is a run awaiting approval:
// GitHub shows it completed with the conclusion action_required, and an
// approved run's check run moves on from it to in_progress.
//
//	none ──► queued ──► action_required ──► in_progress ──► completed
//	   └────────┴──────────────┴─────────────────┴──────────────►┘
//	                  (a state may be skipped, never gone back to)
const (
	CheckNone           CheckState = 0
	CheckQueued         CheckState = 1
	CheckActionRequired CheckState = 2
	CheckInProgress     CheckState = 3
	CheckCompleted      CheckState = 4
)

// String names the state: GitHub's status ("queued", "in_progress",
// "completed"), "action_required", or "none".
func (s CheckState) String() string {
	switch s {
	case CheckQueued:
		return "queued"
	case CheckActionRequired:
		return "action_required"
	case CheckInProgress:
		return "in_progress"
	case CheckCompleted:
		return "completed"
	}
	return "none"
}

// CheckReport is one row of the durable queue of GitHub check run
// reports: the check run of one run, what it should show and what GitHub
// was last told.
type CheckReport struct {
	RunID string
	// Repo is the GitHub repository, OWNER/NAME.
	Repo string
	// CheckRunID is GitHub's id of the run's check run; zero until it is
	// created.
	CheckRunID int64
	Desired    CheckState
	Reported   CheckState
	// Attempts counts the failed attempts since the last success or the
	// last change of Desired.
	Attempts      int
	NextAttemptAt time.Time
	// LastError is the last attempt's failure; empty after a success.
	LastError string
	// GaveUpAt is set when the reporter stopped retrying; a later change
	// of Desired clears it.
	GaveUpAt  *time.Time
	UpdatedAt time.Time
}

const checkReportColumns = "run_id, repo, check_run_id, desired_state, reported_state, attempts, next_attempt_at, last_error, gave_up_at, updated_at"

func scanCheckReport(row interface{ Scan(...any) error }) (CheckReport, error) {
	var c CheckReport
	var id sql.NullInt64
	err := row.Scan(&c.RunID, &c.Repo, &id, &c.Desired, &c.Reported, &c.Attempts, timeCol{&c.NextAttemptAt},
		&c.LastError, nullTimeCol{&c.GaveUpAt}, timeCol{&c.UpdatedAt})
	c.CheckRunID = id.Int64
	return c, err
}

// EnqueueCheckReport asks for the check run of runID (in repo) to show
// desired, due at now. It adds the row, or moves an existing row's desired
// state forward (resetting its attempts, so a report given up on is tried
// again); a state at or behind the row's desired one changes nothing.
func (q *queries) EnqueueCheckReport(ctx context.Context, runID, repo string, desired CheckState, now time.Time) error {
	if desired < CheckQueued || desired > CheckCompleted {
		return fmt.Errorf("enqueue check report of run %q: desired state %d is not queued, action_required, in_progress or completed", runID, desired)
	}
	_, err := q.exec(ctx,
		"INSERT INTO check_reports (run_id, repo, desired_state, next_attempt_at, updated_at) VALUES (?, ?, ?, ?, ?) "+
			"ON CONFLICT (run_id) DO UPDATE SET desired_state = excluded.desired_state, attempts = 0, gave_up_at = NULL, "+
			"next_attempt_at = excluded.next_attempt_at, updated_at = excluded.updated_at "+
			"WHERE excluded.desired_state > check_reports.desired_state",
		runID, repo, int(desired), timeArg(now), timeArg(now))
	if err != nil {
		return fmt.Errorf("enqueue check report of run %q: %w", runID, classify(err))
	}
	return nil
}

// GetCheckReport returns the report row of runID, or ErrNotFound.
func (q *queries) GetCheckReport(ctx context.Context, runID string) (CheckReport, error) {
	c, err := scanCheckReport(q.queryRow(ctx, "SELECT "+checkReportColumns+" FROM check_reports WHERE run_id = ?", runID))
	if err != nil {
		return CheckReport{}, fmt.Errorf("get check report of run %q: %w", runID, classify(err))
	}
	return c, nil
}

// DueCheckReports returns up to limit rows that have something to report
// and whose next attempt is at or before now, the longest due first.
func (q *queries) DueCheckReports(ctx context.Context, now time.Time, limit int) ([]CheckReport, error) {
	rows, err := q.query(ctx, "SELECT "+checkReportColumns+" FROM check_reports "+
		"WHERE reported_state < desired_state AND gave_up_at IS NULL AND next_attempt_at <= ? "+
		"ORDER BY next_attempt_at, run_id LIMIT ?", timeArg(now), limit)
	if err != nil {
		return nil, fmt.Errorf("list due check reports: %w", classify(err))
	}
	defer rows.Close()
	var out []CheckReport
	for rows.Next() {
		c, err := scanCheckReport(rows)
		if err != nil {
			return nil, fmt.Errorf("list due check reports: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list due check reports: %w", err)
	}
	return out, nil
}

// NextCheckReportAt returns when the soonest pending report is due, and
// false when none is pending.
func (q *queries) NextCheckReportAt(ctx context.Context) (time.Time, bool, error) {
	var at time.Time
	err := q.queryRow(ctx, "SELECT next_attempt_at FROM check_reports "+
		"WHERE reported_state < desired_state AND gave_up_at IS NULL ORDER BY next_attempt_at LIMIT 1").Scan(timeCol{&at})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("find the next check report: %w", err)
	}
	return at, true, nil
}

// RecordCheckReport records that GitHub now shows reported for runID's
// check run checkRunID, in one statement, so a check run's id is stored
// with the fact that it was created. The attempts and error are cleared;
// a desired state behind reported moves up to it. A report behind the
// stored one changes nothing.
func (q *queries) RecordCheckReport(ctx context.Context, runID string, checkRunID int64, reported CheckState, now time.Time) error {
	_, err := q.exec(ctx,
		"UPDATE check_reports SET check_run_id = ?, reported_state = ?, "+
			"desired_state = CASE WHEN desired_state < ? THEN ? ELSE desired_state END, "+
			"attempts = 0, last_error = '', updated_at = ? WHERE run_id = ? AND reported_state < ?",
		checkRunID, int(reported), int(reported), int(reported), timeArg(now), runID, int(reported))
	if err != nil {
		return fmt.Errorf("record check report of run %q: %w", runID, classify(err))
	}
	return nil
}

// FailCheckReport records a failed attempt for runID: its error, and the
// time of the next attempt, or, when giveUp is set, that no more are made
// (until the desired state changes).
func (q *queries) FailCheckReport(ctx context.Context, runID, msg string, next time.Time, giveUp bool, now time.Time) error {
	var gaveUp *time.Time
	if giveUp {
		gaveUp = &now
	}
	_, err := q.exec(ctx,
		"UPDATE check_reports SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?, gave_up_at = ?, updated_at = ? WHERE run_id = ?",
		msg, timeArg(next), nullTimeArg(gaveUp), timeArg(now), runID)
	if err != nil {
		return fmt.Errorf("record failed check report of run %q: %w", runID, classify(err))
	}
	return nil
}
