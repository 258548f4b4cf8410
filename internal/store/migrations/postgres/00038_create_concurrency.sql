-- +goose Up
-- Concurrency groups and matrix limits (docs/workflows.md#concurrency).
--
-- concurrency_locks has one row per group a transaction must decide about
-- alone: it upserts the row first, which locks it until it commits, so
-- two orchestrators on one database never both start a run (or dispatch
-- a job) of one group.
CREATE TABLE concurrency_locks (
    lock_key  TEXT PRIMARY KEY,
    locked_at TIMESTAMPTZ NOT NULL
);

-- run_concurrency puts a run in its workflow-level group. state is
-- 'approval' until a run awaiting approval is approved, then 'waiting'
-- (its jobs held back) or 'active' (started). seq orders the members of a
-- group by when they entered it; cancel_note, when set, is the error the
-- run ends with if it ends cancelled.
CREATE TABLE run_concurrency (
    run_id             TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    source             TEXT NOT NULL,
    grp                TEXT NOT NULL,
    cancel_in_progress INTEGER NOT NULL DEFAULT 0,
    state              TEXT NOT NULL CHECK (state IN ('approval', 'waiting', 'active')),
    seq                BIGINT NOT NULL DEFAULT 0,
    cancel_note        TEXT
);
CREATE INDEX run_concurrency_group_idx ON run_concurrency (source, grp, seq);

-- job_concurrency holds what limits when a job may be dispatched: its
-- job-level group (grp, NULL for none) and, for a matrix job, its base
-- with the matrix's fail-fast and max-parallel.
CREATE TABLE job_concurrency (
    job_id             TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    run_id             TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    source             TEXT NOT NULL,
    grp                TEXT,
    cancel_in_progress INTEGER NOT NULL DEFAULT 0,
    base               TEXT,
    fail_fast          INTEGER NOT NULL DEFAULT 0,
    max_parallel       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX job_concurrency_group_idx ON job_concurrency (source, grp);
CREATE INDEX job_concurrency_siblings_idx ON job_concurrency (run_id, base);

-- +goose Down
DROP TABLE job_concurrency;
DROP TABLE run_concurrency;
DROP TABLE concurrency_locks;
