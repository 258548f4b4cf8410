-- +goose Up
-- Workers an operator revoked: their certificates are refused by every
-- coordinator (at connect, at renewal and at each heartbeat), so a
-- compromised worker is cut off at once instead of renewing its
-- certificate for as long as it reaches a coordinator.
CREATE TABLE cluster_revoked_nodes (
    node_id    TEXT PRIMARY KEY,
    revoked_at TIMESTAMPTZ NOT NULL,
    revoked_by TEXT NOT NULL
);

-- +goose Down
DROP TABLE cluster_revoked_nodes;
