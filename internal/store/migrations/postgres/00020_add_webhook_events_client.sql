-- +goose Up
-- What a delivery's sender looked like, recorded for every delivery and
-- the only record of a rejected one (whose body is never stored): the
-- client address, the User-Agent header and the body's size in bytes.
ALTER TABLE webhook_events ADD COLUMN client_addr TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_events ADD COLUMN user_agent TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_events ADD COLUMN body_bytes BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE webhook_events DROP COLUMN body_bytes;
ALTER TABLE webhook_events DROP COLUMN user_agent;
ALTER TABLE webhook_events DROP COLUMN client_addr;
