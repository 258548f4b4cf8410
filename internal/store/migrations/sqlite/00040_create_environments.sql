-- +goose Up
-- Deployment environments (a job's environment: key). require_approval
-- holds a job that names the environment until a person approves it;
-- branches (a JSON list of globs, empty for any) limits the runs that may
-- deploy to it. An environment that has no row has no protection.
CREATE TABLE environments (
    name             TEXT PRIMARY KEY,
    require_approval BOOLEAN NOT NULL DEFAULT FALSE,
    branches         TEXT NOT NULL DEFAULT '[]',
    updated_at       TIMESTAMP NOT NULL,
    updated_by       TEXT NOT NULL DEFAULT ''
);
-- A job held for its environment's approval: state is 'pending' until
-- someone approves it ('approved', by whom and when). The job itself stays
-- 'waiting' meanwhile; the API shows it as awaiting_approval.
CREATE TABLE job_approvals (
    job_id     TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    state      TEXT NOT NULL CHECK (state IN ('pending', 'approved')),
    decided_by TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL,
    decided_at TIMESTAMP
);
CREATE INDEX job_approvals_run_id_idx ON job_approvals (run_id);

-- +goose Down
DROP TABLE job_approvals;
DROP TABLE environments;
