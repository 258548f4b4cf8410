package store

import (
	"context"
	"fmt"
	"time"
)

// ScalerSpawn is the durable record of an agent a scaler spawned: enough
// for a restarted orchestrator to hand the backend its handle back and
// adopt the agent when it reconnects.
type ScalerSpawn struct {
	AgentID string
	Scaler  string
	JobID   string
	RunID   string
	// LabelKey names the label set the agent was spawned from.
	LabelKey string
	// Handle is the backend's opaque, versioned record, base64-encoded.
	Handle     string
	Registered bool
	CreatedAt  time.Time
}

const scalerSpawnColumns = "agent_id, scaler, job_id, run_id, label_key, handle, registered, created_at"

// SaveScalerSpawn writes or replaces a spawn record.
func (q *queries) SaveScalerSpawn(ctx context.Context, s ScalerSpawn) error {
	if s.CreatedAt.IsZero() {
		s.CreatedAt = q.clock.Now()
	}
	_, err := q.exec(ctx,
		"INSERT INTO scaler_spawns ("+scalerSpawnColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?) "+
			// A record without a handle (written before the spawn
			// returned one) never replaces a handle already stored.
			"ON CONFLICT (agent_id) DO UPDATE SET handle = CASE WHEN excluded.handle = '' THEN scaler_spawns.handle ELSE excluded.handle END, "+
			"registered = excluded.registered OR scaler_spawns.registered",
		s.AgentID, s.Scaler, s.JobID, s.RunID, s.LabelKey, s.Handle, s.Registered, timeArg(normTime(s.CreatedAt)))
	if err != nil {
		return fmt.Errorf("save spawn of agent %q: %w", s.AgentID, classify(err))
	}
	return nil
}

// DeleteScalerSpawn removes a spawn record; a missing one is no error.
func (q *queries) DeleteScalerSpawn(ctx context.Context, agentID string) error {
	if _, err := q.exec(ctx, "DELETE FROM scaler_spawns WHERE agent_id = ?", agentID); err != nil {
		return fmt.Errorf("delete spawn of agent %q: %w", agentID, classify(err))
	}
	return nil
}

// ListScalerSpawns returns every spawn record, oldest first.
func (q *queries) ListScalerSpawns(ctx context.Context) ([]ScalerSpawn, error) {
	rows, err := q.query(ctx, "SELECT "+scalerSpawnColumns+" FROM scaler_spawns ORDER BY created_at, agent_id")
	if err != nil {
		return nil, fmt.Errorf("list spawns: %w", classify(err))
	}
	defer rows.Close()
	var out []ScalerSpawn
	for rows.Next() {
		var s ScalerSpawn
		if err := rows.Scan(&s.AgentID, &s.Scaler, &s.JobID, &s.RunID, &s.LabelKey, &s.Handle, &s.Registered, timeCol{&s.CreatedAt}); err != nil {
			return nil, fmt.Errorf("list spawns: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list spawns: %w", classify(err))
	}
	return out, nil
}
