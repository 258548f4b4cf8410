-- +goose Up
CREATE TABLE dispatch_queue (
    job_id                  TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    run_id                  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    labels                  TEXT NOT NULL DEFAULT '[]',
    status                  TEXT NOT NULL CHECK (status IN ('pending', 'dispatched')),
    agent_id                TEXT,
    dispatch_attempts       INTEGER NOT NULL DEFAULT 0,
    enqueued_at             TIMESTAMP NOT NULL,
    expires_at              TIMESTAMP,
    ack_deadline            TIMESTAMP,
    recovery_agent_id       TEXT,
    recovery_deadline       TIMESTAMP,
    last_provisioning_error TEXT,
    last_requeue_reason     TEXT,
    updated_at              TIMESTAMP NOT NULL
);
CREATE INDEX dispatch_queue_status_enqueued_at_idx ON dispatch_queue (status, enqueued_at, job_id);
CREATE INDEX dispatch_queue_run_id_idx ON dispatch_queue (run_id);
CREATE INDEX dispatch_queue_ack_deadline_idx ON dispatch_queue (ack_deadline);
CREATE INDEX dispatch_queue_recovery_deadline_idx ON dispatch_queue (recovery_deadline);

-- +goose Down
DROP TABLE dispatch_queue;
