-- +goose Up
CREATE TABLE job_events (
    id         TEXT PRIMARY KEY,
    job_id     TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    run_id     TEXT NOT NULL,
    type       TEXT NOT NULL,
    agent_id   TEXT NOT NULL DEFAULT '',
    detail     TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX job_events_job_id_created_at_idx ON job_events (job_id, created_at, id);

-- +goose Down
DROP TABLE job_events;
