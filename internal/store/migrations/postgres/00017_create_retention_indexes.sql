-- +goose Up
-- Retention deletes runs by the time they finished and webhook events by
-- the time they arrived; without these the hourly sweep scans the tables.
CREATE INDEX runs_finished_at_idx ON runs (finished_at);
CREATE INDEX webhook_events_received_at_idx ON webhook_events (received_at);

-- +goose Down
DROP INDEX webhook_events_received_at_idx;
DROP INDEX runs_finished_at_idx;
