-- +goose Up
CREATE TABLE secrets (
    scope       TEXT NOT NULL,
    name        TEXT NOT NULL,
    ciphertext  TEXT NOT NULL,
    key_version INTEGER NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL,
    updated_by  TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (scope, name)
);

-- +goose Down
DROP TABLE secrets;
