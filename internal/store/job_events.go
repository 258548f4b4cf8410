package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// JobEvent is one entry of a job's timeline that is not a status change:
// the steps of provisioning an agent for it (scaler events).
type JobEvent struct {
	ID      string
	JobID   string
	RunID   string
	Type    string
	AgentID string
	Detail  string
	// CreatedAt is stamped by AddJobEvent when zero.
	CreatedAt time.Time
}

const jobEventColumns = "id, job_id, run_id, type, agent_id, detail, created_at"

// AddJobEvent appends an event to a job's timeline. A missing job gives
// ErrNotFound.
func (q *queries) AddJobEvent(ctx context.Context, ev JobEvent) (JobEvent, error) {
	if ev.ID == "" {
		ev.ID = NewID()
	}
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = q.clock.Now()
	}
	ev.CreatedAt = normTime(ev.CreatedAt)
	if ev.Type == "" {
		return JobEvent{}, errors.New("add job event: Type is empty")
	}
	_, err := q.exec(ctx, "INSERT INTO job_events ("+jobEventColumns+") VALUES (?, ?, ?, ?, ?, ?, ?)",
		ev.ID, ev.JobID, ev.RunID, ev.Type, ev.AgentID, ev.Detail, timeArg(ev.CreatedAt))
	if err != nil {
		err = classify(err)
		if errors.Is(err, ErrConflict) {
			err = ErrNotFound // the foreign key: no such job
		}
		return JobEvent{}, fmt.Errorf("add event %q to job %q: %w", ev.Type, ev.JobID, err)
	}
	return ev, nil
}

// ListJobEvents returns a job's events, oldest first.
func (q *queries) ListJobEvents(ctx context.Context, jobID string) ([]JobEvent, error) {
	rows, err := q.query(ctx, "SELECT "+jobEventColumns+" FROM job_events WHERE job_id = ? ORDER BY created_at, id", jobID)
	if err != nil {
		return nil, fmt.Errorf("list events of job %q: %w", jobID, classify(err))
	}
	defer rows.Close()
	var out []JobEvent
	for rows.Next() {
		var ev JobEvent
		if err := rows.Scan(&ev.ID, &ev.JobID, &ev.RunID, &ev.Type, &ev.AgentID, &ev.Detail, timeCol{&ev.CreatedAt}); err != nil {
			return nil, fmt.Errorf("list events of job %q: %w", jobID, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events of job %q: %w", jobID, classify(err))
	}
	return out, nil
}
