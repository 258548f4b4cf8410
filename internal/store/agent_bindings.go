package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// AgentBinding says which credential an agent id belongs to. Credential is
// an opaque string chosen by the caller ("token:<agent token id>" for an
// agent token); two registrations are the same agent only if their
// credentials are equal.
type AgentBinding struct {
	AgentID    string
	Credential string
}

// BindAgent binds agentID to credential, unless agentID is bound to
// another credential and still holds a job: a row of the dispatch queue
// dispatched to it, or waiting for it to come back. It returns the
// credential the id is bound to after the call and whether it is now
// credential's. Run it in a transaction with the caller's other checks.
func (q *queries) BindAgent(ctx context.Context, agentID, credential string) (string, bool, error) {
	var held string
	err := q.queryRow(ctx, "SELECT credential FROM agent_bindings WHERE agent_id = ?", agentID).Scan(&held)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return "", false, fmt.Errorf("read binding of agent %q: %w", agentID, classify(err))
	case held != credential:
		var one int
		err := q.queryRow(ctx, `SELECT 1 FROM dispatch_queue WHERE status = 'dispatched'
			AND (agent_id = ? OR recovery_agent_id = ?) LIMIT 1`, agentID, agentID).Scan(&one)
		if err == nil {
			return held, false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return "", false, fmt.Errorf("read jobs of agent %q: %w", agentID, classify(err))
		}
	default:
		return held, true, nil
	}
	_, err = q.exec(ctx, `INSERT INTO agent_bindings (agent_id, credential, bound_at) VALUES (?, ?, ?)
		ON CONFLICT (agent_id) DO UPDATE SET credential = excluded.credential, bound_at = excluded.bound_at`,
		agentID, credential, timeArg(q.clock.Now()))
	if err != nil {
		return "", false, fmt.Errorf("bind agent %q: %w", agentID, classify(err))
	}
	return credential, true, nil
}

// UnbindAgent drops the binding of agentID to credential, if it is still
// that one: the agent left holding no job, so the id is free again. The
// table then holds only the ids of connected agents and of agents jobs
// wait for.
func (q *queries) UnbindAgent(ctx context.Context, agentID, credential string) error {
	if _, err := q.exec(ctx, "DELETE FROM agent_bindings WHERE agent_id = ? AND credential = ?", agentID, credential); err != nil {
		return fmt.Errorf("unbind agent %q: %w", agentID, classify(err))
	}
	return nil
}
