-- +goose Up
-- The orchestrator instance that dispatched the row and watches it: its
-- ack and recovery sweeps act on the rows it owns and no others, so that
-- coordinators sharing the database never settle each other's dispatches.
-- NULL while pending, and on rows dispatched before this column existed
-- (taken over like those of a departed instance).
ALTER TABLE dispatch_queue ADD COLUMN owner_instance TEXT;

-- +goose Down
ALTER TABLE dispatch_queue DROP COLUMN owner_instance;
