-- +goose Up
CREATE TABLE delivery_dedup (
    source      TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (source, delivery_id)
);
CREATE INDEX delivery_dedup_expires_at_idx ON delivery_dedup (expires_at);

-- +goose Down
DROP TABLE delivery_dedup;
