package store

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// CacheEntry is a bundle of a job's cache paths, saved under a key in a
// scope of a source (see internal/caches for scopes). Its bytes are a
// blob under BlobKey.
type CacheEntry struct {
	ID      string
	Source  string
	Scope   string
	Key     string
	Version string
	BlobKey string
	Size    int64
	SHA256  string
	// RunID is the run whose job saved it.
	RunID      string
	CreatedAt  time.Time
	LastUsedAt time.Time
}

const cacheColumns = "id, source, scope, cache_key, version, blob_key, size_bytes, sha256, run_id, created_at, last_used_at"

// PutCacheEntry records a saved entry, replacing the one of the same
// source, scope, key and version if there is one, in one transaction. It
// returns the replaced entry's blob key ("" when none): the caller
// deletes that blob. CreatedAt and LastUsedAt are stamped when zero.
func (db *DB) PutCacheEntry(ctx context.Context, e CacheEntry) (replaced string, err error) {
	err = db.Tx(ctx, func(tx *Tx) error {
		replaced = ""
		if e.CreatedAt.IsZero() {
			e.CreatedAt = tx.clock.Now()
		}
		if e.LastUsedAt.IsZero() {
			e.LastUsedAt = e.CreatedAt
		}
		row := tx.writeRow(ctx, "DELETE FROM cache_entries WHERE source = ? AND scope = ? AND cache_key = ? AND version = ? RETURNING blob_key",
			e.Source, e.Scope, e.Key, e.Version)
		if err := row.Scan(&replaced); err != nil && !errors.Is(classify(err), ErrNotFound) {
			return err
		}
		_, err := tx.exec(ctx, "INSERT INTO cache_entries ("+cacheColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			e.ID, e.Source, e.Scope, e.Key, e.Version, e.BlobKey, e.Size, e.SHA256, e.RunID, timeArg(e.CreatedAt), timeArg(e.LastUsedAt))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("put cache entry %q of source %q, scope %q: %w", e.Key, e.Source, e.Scope, classify(err))
	}
	return replaced, nil
}

// FindCacheEntry returns the entry of source and scope saved under
// exactly key with version, or ErrNotFound.
func (q *queries) FindCacheEntry(ctx context.Context, source, scope, key, version string) (CacheEntry, error) {
	return q.findCacheEntry(ctx, "cache_key = ?", source, scope, version, key)
}

// FindCacheEntryByPrefix returns the newest entry of source and scope
// with version whose key starts with prefix, or ErrNotFound.
func (q *queries) FindCacheEntryByPrefix(ctx context.Context, source, scope, prefix, version string) (CacheEntry, error) {
	// substr counts characters on both engines.
	return q.findCacheEntry(ctx, "substr(cache_key, 1, ?) = ?", source, scope, version, utf8.RuneCountInString(prefix), prefix)
}

func (q *queries) findCacheEntry(ctx context.Context, match, source, scope, version string, args ...any) (CacheEntry, error) {
	out, err := q.listCacheEntries(ctx, "WHERE source = ? AND scope = ? AND version = ? AND "+match+" ORDER BY created_at DESC LIMIT 1",
		append([]any{source, scope, version}, args...)...)
	if err == nil && len(out) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return CacheEntry{}, fmt.Errorf("find cache entry of source %q, scope %q: %w", source, scope, err)
	}
	return out[0], nil
}

// GetCacheEntry returns the entry id, or ErrNotFound.
func (q *queries) GetCacheEntry(ctx context.Context, id string) (CacheEntry, error) {
	out, err := q.listCacheEntries(ctx, "WHERE id = ?", id)
	if err == nil && len(out) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return CacheEntry{}, fmt.Errorf("get cache entry %q: %w", id, err)
	}
	return out[0], nil
}

// TouchCacheEntry sets when the entry was last restored.
func (q *queries) TouchCacheEntry(ctx context.Context, id string, at time.Time) error {
	if _, err := q.exec(ctx, "UPDATE cache_entries SET last_used_at = ? WHERE id = ?", timeArg(at), id); err != nil {
		return fmt.Errorf("touch cache entry %q: %w", id, classify(err))
	}
	return nil
}

// CacheBytes sums the sizes of every cache entry.
func (q *queries) CacheBytes(ctx context.Context) (int64, error) {
	var n int64
	if err := q.queryRow(ctx, "SELECT COALESCE(SUM(size_bytes), 0) FROM cache_entries").Scan(&n); err != nil {
		return 0, fmt.Errorf("sum cache entry sizes: %w", classify(err))
	}
	return n, nil
}

// LeastRecentlyUsedCacheEntries returns up to limit entries, the least
// recently used first: what eviction deletes first.
func (q *queries) LeastRecentlyUsedCacheEntries(ctx context.Context, limit int) ([]CacheEntry, error) {
	out, err := q.listCacheEntries(ctx, "ORDER BY last_used_at, id LIMIT ?", limit)
	if err != nil {
		return nil, fmt.Errorf("list least recently used cache entries: %w", err)
	}
	return out, nil
}

// CacheEntriesUnusedSince returns up to limit entries last used before
// cutoff.
func (q *queries) CacheEntriesUnusedSince(ctx context.Context, cutoff time.Time, limit int) ([]CacheEntry, error) {
	out, err := q.listCacheEntries(ctx, "WHERE last_used_at < ? ORDER BY last_used_at, id LIMIT ?", timeArg(cutoff), limit)
	if err != nil {
		return nil, fmt.Errorf("list cache entries unused since %s: %w", cutoff.UTC().Format(time.RFC3339), err)
	}
	return out, nil
}

// DeleteCacheEntry deletes an entry's row (not its blob); a missing one
// is not an error.
func (q *queries) DeleteCacheEntry(ctx context.Context, id string) error {
	if _, err := q.exec(ctx, "DELETE FROM cache_entries WHERE id = ?", id); err != nil {
		return fmt.Errorf("delete cache entry %q: %w", id, classify(err))
	}
	return nil
}

// CacheBlobKeys returns the blob key of every cache entry.
func (q *queries) CacheBlobKeys(ctx context.Context) (map[string]bool, error) {
	return q.blobKeys(ctx, "cache_entries")
}

func (q *queries) listCacheEntries(ctx context.Context, where string, args ...any) ([]CacheEntry, error) {
	rows, err := q.query(ctx, "SELECT "+cacheColumns+" FROM cache_entries "+where, args...)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	var out []CacheEntry
	for rows.Next() {
		var e CacheEntry
		if err := rows.Scan(&e.ID, &e.Source, &e.Scope, &e.Key, &e.Version, &e.BlobKey, &e.Size, &e.SHA256, &e.RunID,
			timeCol{&e.CreatedAt}, timeCol{&e.LastUsedAt}); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, classify(rows.Err())
}
