-- +goose Up
-- A job's attempts (the workflow's retry:). retries counts the times the
-- job went back to the queue for another attempt after one ended, so its
-- attempt number is retries + 1; queued_at is when it last entered the
-- queue. job_attempts keeps one row per attempt that ended and was
-- retried: why it ended, on which agent, and the dispatch count (jobs.attempt)
-- it reached, which tells its log lines from the next attempt's.
ALTER TABLE jobs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN queued_at TIMESTAMPTZ;
UPDATE jobs SET queued_at = (SELECT q.enqueued_at FROM dispatch_queue q WHERE q.job_id = jobs.id)
 WHERE id IN (SELECT job_id FROM dispatch_queue);
CREATE TABLE job_attempts (
    job_id     TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    run_id     TEXT NOT NULL,
    attempt    INTEGER NOT NULL CHECK (attempt >= 1),
    cause      TEXT NOT NULL,
    error      TEXT NOT NULL DEFAULT '',
    agent_id   TEXT NOT NULL DEFAULT '',
    dispatch   INTEGER NOT NULL DEFAULT 0,
    started_at TIMESTAMPTZ,
    ended_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX job_attempts_run_id_idx ON job_attempts (run_id);

-- +goose Down
DROP TABLE job_attempts;
ALTER TABLE jobs DROP COLUMN queued_at;
ALTER TABLE jobs DROP COLUMN retries;
