-- +goose Up
-- One row per lease coordinators contend for (the leader's is "leader").
-- holder is the instance id that holds it, term counts the holders (it
-- grows by one with each new holder, never on a renewal) and is the fence
-- a holder's writes check; expires_ms is by the database's clock, in
-- milliseconds since the Unix epoch, so that the coordinators' own clocks
-- never decide who holds it.
CREATE TABLE cluster_leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    term       BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);

-- +goose Down
DROP TABLE cluster_leases;
