-- +goose Up
-- The fork pull request policy: each source says what a pull request from a
-- fork does (fork_pull_requests: approve, run or ignore), and a run held
-- for approval has the status awaiting_approval.
ALTER TABLE sources ADD COLUMN fork_pull_requests TEXT NOT NULL DEFAULT 'approve'
    CHECK (fork_pull_requests IN ('approve', 'run', 'ignore'));
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('awaiting_approval', 'pending', 'running', 'success', 'failure', 'cancelled'));

-- +goose Down
-- A run still awaiting approval cannot be kept under the old statuses: it
-- is cancelled.
UPDATE runs SET status = 'cancelled', error = 'cancelled: the awaiting_approval status was removed by a schema downgrade'
    WHERE status = 'awaiting_approval';
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('pending', 'running', 'success', 'failure', 'cancelled'));
ALTER TABLE sources DROP COLUMN fork_pull_requests;
