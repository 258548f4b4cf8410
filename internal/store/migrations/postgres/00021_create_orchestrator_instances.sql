-- +goose Up
-- Live orchestrator processes using this database, one row each, kept
-- fresh by a heartbeat. A row whose expires_at has passed belongs to a
-- process that died; the next one to start removes it. role is
-- 'standalone' for an orchestrator that must own the database alone;
-- clustered coordinators will register under a role of their own.
CREATE TABLE orchestrator_instances (
    id           TEXT PRIMARY KEY,
    role         TEXT NOT NULL,
    hostname     TEXT NOT NULL,
    pid          BIGINT NOT NULL,
    addr         TEXT NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE orchestrator_instances;
