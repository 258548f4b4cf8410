-- +goose Up
-- Agents an operator drained: they take no new job until undrained. The
-- row outlives the agent's reconnects and the orchestrator's restarts.
CREATE TABLE agent_drains (
    agent_id   TEXT PRIMARY KEY,
    reason     TEXT NOT NULL DEFAULT '',
    drained_by TEXT NOT NULL DEFAULT '',
    drained_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE agent_drains;
