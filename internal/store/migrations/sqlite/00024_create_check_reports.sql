-- +goose Up
-- The durable queue of GitHub check run reports: one row per run of a
-- source tied to a GitHub repository. desired_state is what the run's
-- check run should show (1 queued, 2 completed as action_required while
-- the run awaits approval, 3 in_progress, 4 completed) and
-- reported_state what GitHub was last told (0: nothing yet); a row is due
-- while reported_state < desired_state and next_attempt_at has come.
-- check_run_id is GitHub's id, set in the statement that records the
-- check run's creation, so a restart never creates a second one.
CREATE TABLE check_reports (
    run_id          TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    repo            TEXT NOT NULL,
    check_run_id    BIGINT,
    desired_state   INTEGER NOT NULL CHECK (desired_state BETWEEN 1 AND 4),
    reported_state  INTEGER NOT NULL DEFAULT 0 CHECK (reported_state BETWEEN 0 AND 4),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMP NOT NULL,
    last_error      TEXT NOT NULL DEFAULT '',
    gave_up_at      TIMESTAMP,
    updated_at      TIMESTAMP NOT NULL
);
CREATE INDEX check_reports_due_idx ON check_reports (next_attempt_at);

-- +goose Down
DROP TABLE check_reports;
