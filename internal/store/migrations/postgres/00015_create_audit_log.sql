-- +goose Up
CREATE TABLE audit_log (
    id          TEXT PRIMARY KEY,
    created_at  TIMESTAMPTZ NOT NULL,
    actor_type  TEXT NOT NULL,
    actor_id    TEXT NOT NULL DEFAULT '',
    actor_name  TEXT NOT NULL DEFAULT '',
    role        TEXT NOT NULL DEFAULT '',
    action      TEXT NOT NULL,
    target      TEXT NOT NULL DEFAULT '',
    outcome     TEXT NOT NULL CHECK (outcome IN ('allowed', 'denied', 'failed')),
    status      INTEGER NOT NULL DEFAULT 0,
    detail      TEXT NOT NULL DEFAULT '',
    client_addr TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_created_at_idx ON audit_log (created_at, id);

-- +goose Down
DROP TABLE audit_log;
