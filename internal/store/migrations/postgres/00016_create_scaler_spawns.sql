-- +goose Up
CREATE TABLE scaler_spawns (
    agent_id   TEXT PRIMARY KEY,
    scaler     TEXT NOT NULL,
    job_id     TEXT NOT NULL DEFAULT '',
    run_id     TEXT NOT NULL DEFAULT '',
    label_key  TEXT NOT NULL DEFAULT '',
    handle     TEXT NOT NULL DEFAULT '',
    registered BOOLEAN NOT NULL DEFAULT FALSE,
    created_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE scaler_spawns;
