-- +goose Up
-- What a coordinator applied of each worker outbox stream: the sequence
-- number of the last entry applied, kept in the same transaction as the
-- entry's effects, so that an entry a worker resends (after a lost
-- acknowledgement or a restart) is never applied twice. Keyed by the
-- outbox's own id, not the worker's: a worker that lost its outbox file
-- starts a new one, numbered from 1 again.
CREATE TABLE cluster_relay_applied (
    outbox_id   TEXT NOT NULL,
    stream      TEXT NOT NULL,
    node_id     TEXT NOT NULL,
    applied_seq BIGINT NOT NULL,
    updated_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (outbox_id, stream)
);

-- +goose Down
DROP TABLE cluster_relay_applied;
