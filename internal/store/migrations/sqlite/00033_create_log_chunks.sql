-- +goose Up
-- Step logs kept in the database, for coordinators: every coordinator of a
-- cluster reads and follows every job's log, and a log survives the loss
-- of the coordinator that received it. Each row is one stored chunk: the
-- exact bytes a step's log file would hold for it (one JSON record per
-- line), at byte offsets [start_off, end_off) of the step's log, so byte
-- cursors mean what they mean in the file store.
CREATE TABLE log_chunks (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    job_id    TEXT NOT NULL,
    step      INTEGER NOT NULL,
    start_off INTEGER NOT NULL,
    end_off   INTEGER NOT NULL,
    attempt   INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    body      BLOB NOT NULL,
    PRIMARY KEY (job_id, step, start_off)
);
CREATE INDEX log_chunks_run_id_idx ON log_chunks (run_id);

-- The position (attempt, seq) of the last chunk stored per job, across
-- its steps: a chunk not after it is a replay and is skipped.
CREATE TABLE log_positions (
    job_id  TEXT PRIMARY KEY,
    run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    seq     INTEGER NOT NULL
);
CREATE INDEX log_positions_run_id_idx ON log_positions (run_id);

-- +goose Down
DROP TABLE log_positions;
DROP TABLE log_chunks;
