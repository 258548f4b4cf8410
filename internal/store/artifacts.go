package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Artifact is the bundle of files one job of a run uploaded after its
// steps. Its bytes are a blob (internal/blobs) under BlobKey; the row is
// what the run's pages, the CLI and the jobs downstream read.
type Artifact struct {
	ID      string
	RunID   string
	JobID   string
	JobName string
	BlobKey string
	// Size is the bundle's (compressed) length and SHA256 its lowercase
	// hex digest.
	Size   int64
	SHA256 string
	// FileCount and ContentBytes count its regular files and their bytes.
	FileCount    int
	ContentBytes int64
	// Files are its regular files; only ListArtifacts and GetArtifact
	// fill them.
	Files     []ArtifactFile
	CreatedAt time.Time
	// ExpiresAt is when the storage sweep deletes it; nil keeps it as
	// long as its run.
	ExpiresAt *time.Time
}

// ArtifactFile is one regular file of an artifact bundle.
type ArtifactFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

const artifactHeadColumns = "id, run_id, job_id, job_name, blob_key, size_bytes, sha256, file_count, content_bytes, created_at, expires_at"

// PutArtifact records a's upload, replacing the artifact its job already
// had in the run (an earlier attempt's), in one transaction. It returns
// the blob key of the replaced artifact, "" when there was none: the
// caller deletes that blob. CreatedAt is stamped when zero.
func (db *DB) PutArtifact(ctx context.Context, a Artifact) (replaced string, err error) {
	files, err := jsonArg(nonNilFiles(a.Files))
	if err != nil {
		return "", err
	}
	err = db.Tx(ctx, func(tx *Tx) error {
		replaced = ""
		if a.CreatedAt.IsZero() {
			a.CreatedAt = tx.clock.Now()
		}
		row := tx.writeRow(ctx, "DELETE FROM artifacts WHERE run_id = ? AND job_name = ? RETURNING blob_key", a.RunID, a.JobName)
		if err := row.Scan(&replaced); err != nil && !errors.Is(classify(err), ErrNotFound) {
			return err
		}
		_, err := tx.exec(ctx, "INSERT INTO artifacts ("+artifactHeadColumns+", files) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			a.ID, a.RunID, a.JobID, a.JobName, a.BlobKey, a.Size, a.SHA256, a.FileCount, a.ContentBytes,
			timeArg(a.CreatedAt), nullTimeArg(a.ExpiresAt), files)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("put artifact of job %q of run %q: %w", a.JobName, a.RunID, classify(err))
	}
	return replaced, nil
}

func nonNilFiles(f []ArtifactFile) []ArtifactFile {
	if f == nil {
		return []ArtifactFile{}
	}
	return f
}

// ListArtifacts returns the artifacts of a run, with their files, by job
// name.
func (q *queries) ListArtifacts(ctx context.Context, runID string) ([]Artifact, error) {
	out, err := q.listArtifacts(ctx, true, "WHERE run_id = ? ORDER BY job_name", runID)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of run %q: %w", runID, err)
	}
	return out, nil
}

// GetArtifact returns the artifact of job jobName of a run, with its
// files, or ErrNotFound.
func (q *queries) GetArtifact(ctx context.Context, runID, jobName string) (Artifact, error) {
	out, err := q.listArtifacts(ctx, true, "WHERE run_id = ? AND job_name = ?", runID, jobName)
	if err == nil && len(out) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("get artifact of job %q of run %q: %w", jobName, runID, err)
	}
	return out[0], nil
}

// RunArtifactBytes sums the bundle sizes of a run's artifacts, leaving
// out job exceptJob's (which an upload would replace).
func (q *queries) RunArtifactBytes(ctx context.Context, runID, exceptJob string) (int64, error) {
	var n int64
	err := q.queryRow(ctx, "SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts WHERE run_id = ? AND job_name <> ?", runID, exceptJob).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sum artifact sizes of run %q: %w", runID, classify(err))
	}
	return n, nil
}

// SweepableArtifacts returns up to limit artifacts (without their files)
// that expired before now or whose run no longer exists: what the storage
// sweep deletes.
func (q *queries) SweepableArtifacts(ctx context.Context, now time.Time, limit int) ([]Artifact, error) {
	out, err := q.listArtifacts(ctx, false,
		`WHERE (expires_at IS NOT NULL AND expires_at < ?) OR NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = artifacts.run_id)
		 ORDER BY created_at LIMIT ?`, timeArg(now), limit)
	if err != nil {
		return nil, fmt.Errorf("list sweepable artifacts: %w", err)
	}
	return out, nil
}

// DeleteArtifact deletes an artifact's row (not its blob); a missing one
// is not an error.
func (q *queries) DeleteArtifact(ctx context.Context, id string) error {
	if _, err := q.exec(ctx, "DELETE FROM artifacts WHERE id = ?", id); err != nil {
		return fmt.Errorf("delete artifact %q: %w", id, classify(err))
	}
	return nil
}

// ArtifactBlobKeys returns the blob key of every artifact.
func (q *queries) ArtifactBlobKeys(ctx context.Context) (map[string]bool, error) {
	return q.blobKeys(ctx, "artifacts")
}

// blobKeys returns the blob_key column of table.
func (q *queries) blobKeys(ctx context.Context, table string) (map[string]bool, error) {
	rows, err := q.query(ctx, "SELECT blob_key FROM "+table)
	if err != nil {
		return nil, fmt.Errorf("list %s blob keys: %w", table, classify(err))
	}
	defer rows.Close()
	keys := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("list %s blob keys: %w", table, err)
		}
		keys[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s blob keys: %w", table, classify(err))
	}
	return keys, nil
}

func (q *queries) listArtifacts(ctx context.Context, withFiles bool, where string, args ...any) ([]Artifact, error) {
	cols := artifactHeadColumns
	if withFiles {
		cols += ", files"
	}
	rows, err := q.query(ctx, "SELECT "+cols+" FROM artifacts "+where, args...)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	var out []Artifact
	for rows.Next() {
		var a Artifact
		dst := []any{&a.ID, &a.RunID, &a.JobID, &a.JobName, &a.BlobKey, &a.Size, &a.SHA256, &a.FileCount, &a.ContentBytes,
			timeCol{&a.CreatedAt}, nullTimeCol{&a.ExpiresAt}}
		if withFiles {
			dst = append(dst, jsonCol[[]ArtifactFile]{&a.Files})
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, classify(rows.Err())
}
