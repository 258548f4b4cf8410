-- +goose Up
-- The cluster's certificate authority: at most one row. key_sealed is the
-- CA's private key (PKCS #8 PEM) sealed under the secret key
-- (KICI_SECRET_KEY); cert_pem is not secret.
CREATE TABLE cluster_ca (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    cert_pem   TEXT NOT NULL,
    key_sealed TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);

-- Tokens a worker joins the cluster with, each good for one join. Only
-- the hash of the secret is kept. used_at and used_by (the node id that
-- joined with it) are set together when the token is spent; expires_at
-- NULL means the token does not expire.
CREATE TABLE join_tokens (
    id          TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    expires_at  TIMESTAMP,
    used_at     TIMESTAMP,
    used_by     TEXT,
    revoked_at  TIMESTAMP
);

-- +goose Down
DROP TABLE join_tokens;
DROP TABLE cluster_ca;
