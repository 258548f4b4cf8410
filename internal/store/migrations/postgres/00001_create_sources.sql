-- +goose Up
CREATE TABLE sources (
    name            TEXT PRIMARY KEY,
    kind            TEXT NOT NULL CHECK (kind IN ('local', 'git', 'github')),
    location        TEXT NOT NULL,
    webhook_secrets JSONB NOT NULL DEFAULT '[]',
    created_at      TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE sources;
