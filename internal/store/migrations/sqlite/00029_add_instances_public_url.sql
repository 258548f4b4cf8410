-- +goose Up
-- The URL other nodes and people reach the instance at (KICI_PUBLIC_URL):
-- coordinators know each other by it. Rows written before it have none.
ALTER TABLE orchestrator_instances ADD COLUMN public_url TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE orchestrator_instances DROP COLUMN public_url;
