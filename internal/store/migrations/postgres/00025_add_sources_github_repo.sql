-- +goose Up
-- The GitHub repository (OWNER/NAME) a local or git source mirrors, so its
-- runs are reported to GitHub as check runs; empty for none. A github
-- source's own repository is its location.
ALTER TABLE sources ADD COLUMN github_repo TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sources DROP COLUMN github_repo;
