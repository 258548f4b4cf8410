-- +goose Up
-- What a delivery's listing and its redelivery need: the error text of a
-- delivery that failed (for an invalid workflow, one FILE:LINE:COL:
-- message per line), the provider that sent it (github, generic), the
-- body of an accepted or invalid_workflow delivery (never of a rejected
-- one; NULL otherwise), and for a redelivery the id of the event it
-- re-ran.
ALTER TABLE webhook_events ADD COLUMN error TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_events ADD COLUMN provider TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_events ADD COLUMN body BYTEA;
ALTER TABLE webhook_events ADD COLUMN redelivery_of TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE webhook_events DROP COLUMN redelivery_of;
ALTER TABLE webhook_events DROP COLUMN body;
ALTER TABLE webhook_events DROP COLUMN provider;
ALTER TABLE webhook_events DROP COLUMN error;
