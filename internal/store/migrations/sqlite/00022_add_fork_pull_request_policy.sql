-- +goose NO TRANSACTION
-- +goose Up
-- The fork pull request policy: each source says what a pull request from a
-- fork does (fork_pull_requests: approve, run or ignore), and a run held
-- for approval has the status awaiting_approval.
--
-- SQLite cannot change a CHECK constraint in place, so runs is rebuilt
-- (https://sqlite.org/lang_altertable.html#otheralter). Foreign keys are off
-- while it is: dropping the old table must not cascade to its jobs. That is
-- why this migration runs outside goose's transaction and opens its own;
-- the orchestrator's single write connection runs every statement.
PRAGMA foreign_keys = OFF;
BEGIN;
ALTER TABLE sources ADD COLUMN fork_pull_requests TEXT NOT NULL DEFAULT 'approve'
    CHECK (fork_pull_requests IN ('approve', 'run', 'ignore'));
CREATE TABLE runs_new (
    id            TEXT PRIMARY KEY,
    source        TEXT NOT NULL,
    workflow      TEXT NOT NULL,
    workflow_file TEXT NOT NULL,
    event         TEXT NOT NULL DEFAULT 'null',
    event_kind    TEXT NOT NULL,
    ref           TEXT NOT NULL DEFAULT '',
    sha           TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL
                  CHECK (status IN ('awaiting_approval', 'pending', 'running', 'success', 'failure', 'cancelled')),
    error         TEXT,
    plan          TEXT NOT NULL,
    parent_run_id TEXT REFERENCES runs (id) ON DELETE SET NULL,
    created_at    TIMESTAMP NOT NULL,
    started_at    TIMESTAMP,
    finished_at   TIMESTAMP
);
INSERT INTO runs_new SELECT id, source, workflow, workflow_file, event, event_kind, ref, sha, status, error,
    plan, parent_run_id, created_at, started_at, finished_at FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_created_at_idx ON runs (created_at, id);
CREATE INDEX runs_status_created_at_idx ON runs (status, created_at);
CREATE INDEX runs_source_created_at_idx ON runs (source, created_at);
CREATE INDEX runs_parent_run_id_idx ON runs (parent_run_id);
CREATE INDEX runs_finished_at_idx ON runs (finished_at);
COMMIT;
PRAGMA foreign_keys = ON;

-- +goose Down
-- A run still awaiting approval cannot be kept under the old statuses: it
-- is cancelled.
PRAGMA foreign_keys = OFF;
BEGIN;
UPDATE runs SET status = 'cancelled', error = 'cancelled: the awaiting_approval status was removed by a schema downgrade'
    WHERE status = 'awaiting_approval';
CREATE TABLE runs_old (
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
INSERT INTO runs_old SELECT id, source, workflow, workflow_file, event, event_kind, ref, sha, status, error,
    plan, parent_run_id, created_at, started_at, finished_at FROM runs;
DROP TABLE runs;
ALTER TABLE runs_old RENAME TO runs;
CREATE INDEX runs_created_at_idx ON runs (created_at, id);
CREATE INDEX runs_status_created_at_idx ON runs (status, created_at);
CREATE INDEX runs_source_created_at_idx ON runs (source, created_at);
CREATE INDEX runs_parent_run_id_idx ON runs (parent_run_id);
CREATE INDEX runs_finished_at_idx ON runs (finished_at);
ALTER TABLE sources DROP COLUMN fork_pull_requests;
COMMIT;
PRAGMA foreign_keys = ON;
