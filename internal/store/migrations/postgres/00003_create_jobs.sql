-- +goose Up
CREATE TABLE jobs (
    id          TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    status      TEXT NOT NULL
                CHECK (status IN ('waiting', 'queued', 'dispatched', 'running',
                                  'success', 'failure', 'cancelled', 'skipped')),
    runs_on     JSONB NOT NULL DEFAULT '[]',
    spec        JSONB NOT NULL,
    agent_id    TEXT,
    error       TEXT,
    attempt     INTEGER NOT NULL DEFAULT 0,
    last_seq    BIGINT NOT NULL DEFAULT 0,
    created_at  TIMESTAMPTZ NOT NULL,
    started_at  TIMESTAMPTZ,
    finished_at TIMESTAMPTZ,
    UNIQUE (run_id, name)
);
CREATE INDEX jobs_status_idx ON jobs (status);
CREATE INDEX jobs_agent_id_idx ON jobs (agent_id);

-- +goose Down
DROP TABLE jobs;
