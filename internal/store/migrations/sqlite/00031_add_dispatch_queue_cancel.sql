-- +goose Up
-- A cancel asked for on an instance that does not hold the job's agent:
-- the owner of the row tells its agent (and notes that it did in
-- cancel_sent_by, so that a new owner after a move tells it again). The
-- request lives on the row, so it survives the loss of either instance.
ALTER TABLE dispatch_queue ADD COLUMN cancel_reason TEXT;
ALTER TABLE dispatch_queue ADD COLUMN cancel_force INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dispatch_queue ADD COLUMN cancel_sent_by TEXT;

-- +goose Down
ALTER TABLE dispatch_queue DROP COLUMN cancel_sent_by;
ALTER TABLE dispatch_queue DROP COLUMN cancel_force;
ALTER TABLE dispatch_queue DROP COLUMN cancel_reason;
