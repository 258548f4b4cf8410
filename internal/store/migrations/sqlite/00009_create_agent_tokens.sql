-- +goose Up
CREATE TABLE agent_tokens (
    id           TEXT PRIMARY KEY,
    hash         TEXT NOT NULL UNIQUE,
    labels       TEXT NOT NULL DEFAULT '[]',
    created_at   TIMESTAMP NOT NULL,
    expires_at   TIMESTAMP,
    revoked_at   TIMESTAMP,
    last_used_at TIMESTAMP
);

-- +goose Down
DROP TABLE agent_tokens;
