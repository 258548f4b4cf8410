-- +goose Up
-- One row per address a Firecracker VM holds on its bridge. pool names
-- the bridge's address pool on one host (the orchestrator instance and the
-- bridge), so every scaler on that bridge draws from one set of addresses
-- and two hosts may reuse a subnet. The primary key is what makes an
-- address go to one VM however many spawns race for it; vm_id is unique
-- because a VM holds one address. The row is written before the VM's TAP
-- exists and deleted after the TAP is gone, so the orphan sweep can tell a
-- spawn in progress from a leftover.
CREATE TABLE vm_addresses (
    pool         TEXT NOT NULL,
    address      TEXT NOT NULL,
    scaler       TEXT NOT NULL,
    vm_id        TEXT NOT NULL UNIQUE,
    tap          TEXT NOT NULL,
    mac          TEXT NOT NULL,
    allocated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (pool, address)
);

-- +goose Down
DROP TABLE vm_addresses;
