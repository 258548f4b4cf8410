-- +goose Up
-- Dashboard sessions, kept server-side: the cookie holds a random id whose
-- SHA-256 is id_hash; token_hash is the hash of the admin token the
-- session logged in with (never the token), so a session ends when its
-- token is revoked or expires; csrf is the token every form must send.
CREATE TABLE web_sessions (
    id_hash    TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    csrf       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX web_sessions_expires_at_idx ON web_sessions (expires_at);

-- +goose Down
DROP TABLE web_sessions;
