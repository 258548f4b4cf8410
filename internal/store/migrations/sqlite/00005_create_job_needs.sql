-- +goose Up
CREATE TABLE job_needs (
    job_id       TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    needs_job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    run_on       TEXT NOT NULL DEFAULT '["success"]',
    PRIMARY KEY (job_id, needs_job_id)
);
CREATE INDEX job_needs_needs_job_id_idx ON job_needs (needs_job_id);

-- +goose Down
DROP TABLE job_needs;
