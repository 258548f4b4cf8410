-- +goose Up
CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    source        TEXT NOT NULL,
    workflow      TEXT NOT NULL,
    workflow_file TEXT NOT NULL,
    event         TEXT NOT NULL DEFAULT 'null',
    event_kind    TEXT NOT NULL,
    ref           TEXT NOT NULL DEFAULT '',
    sha           TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL
                  CHECK (status IN ('pending', 'running', 'success', 'failure', 'cancelled')),
    error         TEXT,
    plan          TEXT NOT NULL,
    parent_run_id TEXT REFERENCES runs (id) ON DELETE SET NULL,
    created_at    TIMESTAMP NOT NULL,
    started_at    TIMESTAMP,
    finished_at   TIMESTAMP
);
CREATE INDEX runs_created_at_idx ON runs (created_at, id);
CREATE INDEX runs_status_created_at_idx ON runs (status, created_at);
CREATE INDEX runs_source_created_at_idx ON runs (source, created_at);
CREATE INDEX runs_parent_run_id_idx ON runs (parent_run_id);

-- +goose Down
DROP TABLE runs;
