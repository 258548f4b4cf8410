-- +goose Up
CREATE TABLE secret_key_check (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    key_version INTEGER NOT NULL,
    sealed      TEXT NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE secret_key_check;
