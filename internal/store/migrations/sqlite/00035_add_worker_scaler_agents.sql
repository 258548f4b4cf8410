-- +goose Up
-- The scaler agents a worker's last heartbeat listed (comma-separated
-- agent ids; empty for orchestrators and workers without scalers): a
-- worker whose agents still hold jobs is not forgotten, since they may come
-- back through it within the recovery window.
ALTER TABLE orchestrator_instances ADD COLUMN scaler_agents TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE orchestrator_instances DROP COLUMN scaler_agents;
