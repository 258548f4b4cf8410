package store

import (
	"context"
	"fmt"
	"time"
)

// AgentDrain is an agent an operator drained: it takes no new job until
// the drain is lifted. The agent need not be connected, or even exist yet.
type AgentDrain struct {
	AgentID string
	// Reason says why, for people reading the agent list and the queue.
	Reason string
	// DrainedBy names who drained it (an admin token's name).
	DrainedBy string
	// DrainedAt is stamped by PutAgentDrain.
	DrainedAt time.Time
}

const agentDrainColumns = "agent_id, reason, drained_by, drained_at"

// PutAgentDrain drains d.AgentID, or replaces the reason and author of
// its drain, and returns the drain as stored.
func (q *queries) PutAgentDrain(ctx context.Context, d AgentDrain) (AgentDrain, error) {
	d.DrainedAt = normTime(q.clock.Now())
	_, err := q.exec(ctx,
		"INSERT INTO agent_drains ("+agentDrainColumns+") VALUES (?, ?, ?, ?) "+
			"ON CONFLICT (agent_id) DO UPDATE SET reason = excluded.reason, drained_by = excluded.drained_by, drained_at = excluded.drained_at",
		d.AgentID, d.Reason, d.DrainedBy, timeArg(d.DrainedAt))
	if err != nil {
		return AgentDrain{}, fmt.Errorf("drain agent %q: %w", d.AgentID, classify(err))
	}
	return d, nil
}

// DeleteAgentDrain lifts the drain of agentID; ErrNotFound if it has none.
func (q *queries) DeleteAgentDrain(ctx context.Context, agentID string) error {
	changed, err := q.execChanged(ctx, "DELETE FROM agent_drains WHERE agent_id = ?", agentID)
	if err == nil && !changed {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("undrain agent %q: %w", agentID, classify(err))
	}
	return nil
}

// ListAgentDrains returns every drain, by agent id.
func (q *queries) ListAgentDrains(ctx context.Context) ([]AgentDrain, error) {
	rows, err := q.query(ctx, "SELECT "+agentDrainColumns+" FROM agent_drains ORDER BY agent_id")
	if err != nil {
		return nil, fmt.Errorf("list agent drains: %w", classify(err))
	}
	defer rows.Close()
	var out []AgentDrain
	for rows.Next() {
		var d AgentDrain
		if err := rows.Scan(&d.AgentID, &d.Reason, &d.DrainedBy, timeCol{&d.DrainedAt}); err != nil {
			return nil, fmt.Errorf("list agent drains: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agent drains: %w", err)
	}
	return out, nil
}
