-- +goose Up
ALTER TABLE agent_tokens ADD COLUMN created_by TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE agent_tokens DROP COLUMN created_by;
