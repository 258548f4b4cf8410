-- +goose Up
CREATE TABLE steps (
    job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL CHECK (idx >= 0),
    name        TEXT NOT NULL,
    status      TEXT NOT NULL
                CHECK (status IN ('pending', 'running', 'success', 'failure', 'skipped', 'cancelled')),
    exit_code   INTEGER,
    error       TEXT,
    started_at  TIMESTAMPTZ,
    finished_at TIMESTAMPTZ,
    PRIMARY KEY (job_id, idx)
);

-- +goose Down
DROP TABLE steps;
