-- +goose Up
-- Artifacts: the files a job uploaded after its steps, one bundle per job
-- of a run (a later attempt's upload replaces an earlier one's). The
-- bundle's bytes are a blob (internal/blobs) under blob_key; files lists
-- its regular files as JSON [{path, size}]. There is no foreign key to
-- runs on purpose: a row outlives its deleted run until the storage sweep
-- has deleted its blob too. expires_at NULL keeps it as long as the run.
CREATE TABLE artifacts (
    id            TEXT PRIMARY KEY,
    run_id        TEXT NOT NULL,
    job_id        TEXT NOT NULL,
    job_name      TEXT NOT NULL,
    blob_key      TEXT NOT NULL,
    size_bytes    BIGINT NOT NULL,
    sha256        TEXT NOT NULL,
    file_count    INTEGER NOT NULL,
    content_bytes BIGINT NOT NULL,
    files         JSONB NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    expires_at    TIMESTAMPTZ
);
CREATE UNIQUE INDEX artifacts_run_job_idx ON artifacts (run_id, job_name);
CREATE INDEX artifacts_expires_at_idx ON artifacts (expires_at);
-- Cache entries: a bundle of a job's cache paths saved under a key, in a
-- scope (a branch, tag or pull request of a source). version is a digest
-- of the cache's declared paths, so two caches of one key but different
-- paths never restore each other. last_used_at orders the eviction.
CREATE TABLE cache_entries (
    id           TEXT PRIMARY KEY,
    source       TEXT NOT NULL,
    scope        TEXT NOT NULL,
    cache_key    TEXT NOT NULL,
    version      TEXT NOT NULL,
    blob_key     TEXT NOT NULL,
    size_bytes   BIGINT NOT NULL,
    sha256       TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    last_used_at TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX cache_entries_identity_idx ON cache_entries (source, scope, cache_key, version);
CREATE INDEX cache_entries_last_used_at_idx ON cache_entries (last_used_at);

-- +goose Down
DROP TABLE cache_entries;
DROP TABLE artifacts;
