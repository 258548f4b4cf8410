-- +goose Up
-- Which credential registered each agent id last. While the agent is
-- connected or holds a job, a registration of the same id under another
-- credential is refused (close 4013), so one agent token cannot take over
-- another agent's identity and its jobs. The row survives restarts of the
-- orchestrator, when the registry of live connections starts empty.
CREATE TABLE agent_bindings (
    agent_id   TEXT PRIMARY KEY,
    credential TEXT NOT NULL,
    bound_at   TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE agent_bindings;
