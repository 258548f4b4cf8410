-- +goose Up
CREATE TABLE webhook_events (
    id          TEXT PRIMARY KEY,
    source      TEXT NOT NULL,
    delivery_id TEXT NOT NULL DEFAULT '',
    kind        TEXT NOT NULL DEFAULT '',
    verdict     TEXT NOT NULL,
    detail      TEXT NOT NULL DEFAULT '',
    run_ids     JSONB NOT NULL DEFAULT '[]',
    received_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_events_source_received_at_idx ON webhook_events (source, received_at);
CREATE INDEX webhook_events_delivery_id_idx ON webhook_events (delivery_id);

-- +goose Down
DROP TABLE webhook_events;
