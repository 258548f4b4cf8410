-- +goose Up
-- One row per schedule tick that started a run: the primary key is what
-- makes a tick start one run however many orchestrators share the
-- database (the row is inserted in the transaction that creates the run).
-- run_id is not a foreign key: the row outlives the run's retention, so a
-- tick is never started twice and the newest row still names the last
-- scheduled run.
CREATE TABLE schedule_fires (
    source   TEXT NOT NULL,
    workflow TEXT NOT NULL,
    tick     TIMESTAMP NOT NULL,
    cron     TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    fired_at TIMESTAMP NOT NULL,
    PRIMARY KEY (source, workflow, tick)
);

-- +goose Down
DROP TABLE schedule_fires;
