package caches

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kici-dev/kici/internal/blobs"
	"github.com/kici-dev/kici/internal/bundle"
	"github.com/kici-dev/kici/internal/store"
)

// Defaults of the Config fields whose zero value means "default".
const (
	// DefaultMaxBytes bounds all entries together: 10 GiB, a few
	// dependency trees and build caches of a handful of busy branches.
	DefaultMaxBytes = 10 << 30
	// DefaultMaxEntryBytes bounds one entry as stored: 2 GiB, a large Go
	// build cache or node_modules, compressed.
	DefaultMaxEntryBytes = 2 << 30
	// DefaultMaxUnused deletes entries no job restored for 7 days.
	DefaultMaxUnused = 7 * 24 * time.Hour
	// DefaultMaxUploads bounds the saves received at once.
	DefaultMaxUploads = 16
)

// MaxKeyLen bounds a key (hashFiles filled) and a restore key, in bytes.
const MaxKeyLen = 1024

// orphanGrace is how old a blob must be before the sweep deletes it for
// having no row.
const orphanGrace = time.Hour

// sweepBatch bounds the rows one sweep step reads.
const sweepBatch = 500

var (
	// ErrMiss is returned by Lookup when no entry matches.
	ErrMiss = errors.New("cache miss")
	// ErrBusy is returned by Save when DefaultMaxUploads saves are under
	// way; the caller may try again shortly.
	ErrBusy = errors.New("too many cache saves at once")
)

// LimitError is a save refused for its size; it unwraps to
// blobs.ErrTooLarge.
type LimitError struct {
	// Name is the setting that bounds it, e.g. KICI_CACHE_MAX_ENTRY_BYTES.
	Name  string
	Limit int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the cache entry exceeds %s (%s)", e.Name, bundle.FormatBytes(e.Limit))
}

func (e *LimitError) Unwrap() error { return blobs.ErrTooLarge }

// Store is what the service needs of the database.
type Store interface {
	PutCacheEntry(ctx context.Context, e store.CacheEntry) (string, error)
	FindCacheEntry(ctx context.Context, source, scope, key, version string) (store.CacheEntry, error)
	FindCacheEntryByPrefix(ctx context.Context, source, scope, prefix, version string) (store.CacheEntry, error)
	GetCacheEntry(ctx context.Context, id string) (store.CacheEntry, error)
	TouchCacheEntry(ctx context.Context, id string, at time.Time) error
	CacheBytes(ctx context.Context) (int64, error)
	LeastRecentlyUsedCacheEntries(ctx context.Context, limit int) ([]store.CacheEntry, error)
	CacheEntriesUnusedSince(ctx context.Context, cutoff time.Time, limit int) ([]store.CacheEntry, error)
	DeleteCacheEntry(ctx context.Context, id string) error
	CacheBlobKeys(ctx context.Context) (map[string]bool, error)
}

// Lookup results, as the metrics name them.
const (
	ResultHit     = "hit"     // the exact key
	ResultPartial = "partial" // a restore key's prefix
	ResultMiss    = "miss"
)

// Observer hears of lookups and of the entries' total size; its methods
// must be quick and safe for concurrent use.
type Observer interface {
	// CacheLookup is called once per lookup with its result.
	CacheLookup(result string)
	// CacheBytes is called with the entries' total size after it changed.
	CacheBytes(bytes int64)
}

// Config configures a Service.
type Config struct {
	// MaxBytes bounds the entries together, in bytes
	// (KICI_CACHE_MAX_BYTES); past it the least recently used go. 0 means
	// DefaultMaxBytes.
	MaxBytes int64
	// MaxEntryBytes bounds one entry as stored (KICI_CACHE_MAX_ENTRY_BYTES);
	// 0 means DefaultMaxEntryBytes, or MaxBytes when that is smaller.
	MaxEntryBytes int64
	// MaxUnused deletes entries not restored for this long
	// (KICI_CACHE_MAX_UNUSED_DAYS); 0 means DefaultMaxUnused, negative
	// never.
	MaxUnused time.Duration
	// DefaultBranch is the branch whose scope every run reads last
	// (KICI_CACHE_DEFAULT_BRANCH); "" means DefaultBranch.
	DefaultBranch string
	// Observer, when not nil, hears of lookups and sizes.
	Observer Observer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.MaxBytes < 0:
		return fmt.Errorf("caches config: MaxBytes is %d, want >= 0", c.MaxBytes)
	case c.MaxEntryBytes < 0:
		return fmt.Errorf("caches config: MaxEntryBytes is %d, want >= 0", c.MaxEntryBytes)
	case c.MaxBytes > 0 && c.MaxEntryBytes > c.MaxBytes:
		return fmt.Errorf("caches config: MaxEntryBytes (%d) is over MaxBytes (%d)", c.MaxEntryBytes, c.MaxBytes)
	}
	return nil
}

// Service keeps cache entries.
type Service struct {
	log     *slog.Logger
	db      Store
	blobs   blobs.Store
	cfg     Config
	uploads chan struct{}
}

// New returns a Service after validating cfg.
func New(logger *slog.Logger, db Store, bs blobs.Store, cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxEntryBytes == 0 {
		cfg.MaxEntryBytes = min(DefaultMaxEntryBytes, cfg.MaxBytes)
	}
	if cfg.MaxUnused == 0 {
		cfg.MaxUnused = DefaultMaxUnused
	}
	if cfg.DefaultBranch == "" {
		cfg.DefaultBranch = DefaultBranch
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{log: logger, db: db, blobs: bs, cfg: cfg, uploads: make(chan struct{}, DefaultMaxUploads)}, nil
}

// DefaultBranch is the branch every run's scopes fall back to.
func (s *Service) DefaultBranch() string { return s.cfg.DefaultBranch }

// Query is what a job asks for.
type Query struct {
	Source string
	// Read are the scopes the job's run reads, in order (Scopes.Read).
	Read        []string
	Key         string
	Version     string
	RestoreKeys []string
}

// Lookup finds the entry q asks for (see the package doc for the order),
// marks it used, and reports whether it matched the exact key; ErrMiss
// when none matches.
func (s *Service) Lookup(ctx context.Context, q Query) (store.CacheEntry, bool, error) {
	e, exact, err := s.find(ctx, q)
	result := ResultMiss
	switch {
	case err == nil && exact:
		result = ResultHit
	case err == nil:
		result = ResultPartial
	case !errors.Is(err, ErrMiss):
		return store.CacheEntry{}, false, err
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.CacheLookup(result)
	}
	if err != nil {
		return store.CacheEntry{}, false, err
	}
	if err := s.db.TouchCacheEntry(ctx, e.ID, s.cfg.Now()); err != nil {
		return store.CacheEntry{}, false, err
	}
	return e, exact, nil
}

func (s *Service) find(ctx context.Context, q Query) (store.CacheEntry, bool, error) {
	for _, scope := range q.Read {
		e, err := s.db.FindCacheEntry(ctx, q.Source, scope, q.Key, q.Version)
		if err == nil {
			return e, true, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.CacheEntry{}, false, err
		}
	}
	for _, prefix := range q.RestoreKeys {
		if prefix == "" {
			continue
		}
		for _, scope := range q.Read {
			e, err := s.db.FindCacheEntryByPrefix(ctx, q.Source, scope, prefix, q.Version)
			if err == nil {
				return e, false, nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return store.CacheEntry{}, false, err
			}
		}
	}
	return store.CacheEntry{}, false, ErrMiss
}

// Readable reports whether a run of source reading scopes may restore
// entry e.
func Readable(e store.CacheEntry, source string, read []string) bool {
	if e.Source != source {
		return false
	}
	for _, sc := range read {
		if sc == e.Scope {
			return true
		}
	}
	return false
}

// Open returns a reader of e's bundle that fails at its end if the bytes
// read are not the ones saved (blobs.ErrDigestMismatch).
func (s *Service) Open(ctx context.Context, e store.CacheEntry) (io.ReadCloser, error) {
	rc, _, err := s.blobs.Open(ctx, e.BlobKey)
	if err != nil {
		return nil, err
	}
	return blobs.Verify(rc, e.SHA256), nil
}

// Save is one entry being received.
type Save struct {
	Source string
	// Scope is the run's own scope (Scopes.Write): never another.
	Scope   string
	Key     string
	Version string
	RunID   string
	// SHA256 is the digest the agent computed; required.
	SHA256 string
	// Size is the body's declared length, or -1 when not known.
	Size int64
}

// Save stores the bundle body as the entry sv names, replacing one of the
// same source, scope, key and version, then evicts the least recently
// used entries past MaxBytes. It refuses, storing nothing: a body over
// MaxEntryBytes (*LimitError), one without the digest sv.SHA256
// (blobs.ErrDigestMismatch), any save while DefaultMaxUploads are under
// way (ErrBusy). The bundle is not read: the agents that restore it check
// it.
func (s *Service) Save(ctx context.Context, sv Save, body io.Reader) (store.CacheEntry, error) {
	select {
	case s.uploads <- struct{}{}:
		defer func() { <-s.uploads }()
	default:
		return store.CacheEntry{}, ErrBusy
	}
	limit := &LimitError{Name: "KICI_CACHE_MAX_ENTRY_BYTES", Limit: s.cfg.MaxEntryBytes}
	if sv.Size > limit.Limit {
		return store.CacheEntry{}, limit
	}
	id := store.NewID()
	key := "caches/" + id + ".tgz"
	info, err := s.blobs.Put(ctx, key, body, limit.Limit, sv.SHA256)
	if errors.Is(err, blobs.ErrTooLarge) {
		return store.CacheEntry{}, limit
	}
	if err != nil {
		return store.CacheEntry{}, err
	}
	now := s.cfg.Now()
	e := store.CacheEntry{ID: id, Source: sv.Source, Scope: sv.Scope, Key: sv.Key, Version: sv.Version, BlobKey: key,
		Size: info.Size, SHA256: info.SHA256, RunID: sv.RunID, CreatedAt: now, LastUsedAt: now}
	replaced, err := s.db.PutCacheEntry(ctx, e)
	if err != nil {
		s.deleteBlob(key)
		return store.CacheEntry{}, err
	}
	if replaced != "" {
		s.deleteBlob(replaced)
	}
	if _, err := s.Evict(ctx); err != nil {
		s.log.Warn("evict cache entries", "error", err)
	}
	return e, nil
}

// Evict deletes the least recently used entries until the rest fit in
// MaxBytes, and returns how many it deleted.
func (s *Service) Evict(ctx context.Context) (int, error) {
	total, err := s.db.CacheBytes(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for total > s.cfg.MaxBytes {
		list, err := s.db.LeastRecentlyUsedCacheEntries(ctx, 100)
		if err != nil {
			return n, err
		}
		if len(list) == 0 {
			break
		}
		for _, e := range list {
			if total <= s.cfg.MaxBytes {
				break
			}
			if err := s.remove(ctx, e); err != nil {
				return n, err
			}
			total -= e.Size
			n++
		}
	}
	s.report(total)
	return n, nil
}

// remove deletes an entry's row, then its blob.
func (s *Service) remove(ctx context.Context, e store.CacheEntry) error {
	if err := s.db.DeleteCacheEntry(ctx, e.ID); err != nil {
		return err
	}
	return s.blobs.Delete(ctx, e.BlobKey)
}

func (s *Service) report(total int64) {
	if s.cfg.Observer != nil {
		s.cfg.Observer.CacheBytes(max(total, 0))
	}
}

// deleteBlob deletes a blob no row names; a failure leaves it to the
// sweep's orphan collection.
func (s *Service) deleteBlob(key string) {
	if err := s.blobs.Delete(context.Background(), key); err != nil {
		s.log.Warn("delete cache blob", "key", key, "error", err)
	}
}

// SweepStats count what a sweep deleted.
type SweepStats struct {
	// Unused are the entries no job restored for MaxUnused.
	Unused int
	// Evicted are the least recently used entries past MaxBytes.
	Evicted int
	// Orphans are blobs without a row.
	Orphans int
}

// Sweep deletes the entries not used for MaxUnused before now, evicts
// past MaxBytes, and deletes the cache blobs older than an hour that no
// row names.
func (s *Service) Sweep(ctx context.Context, now time.Time) (SweepStats, error) {
	var st SweepStats
	if s.cfg.MaxUnused > 0 {
		for {
			list, err := s.db.CacheEntriesUnusedSince(ctx, now.Add(-s.cfg.MaxUnused), sweepBatch)
			if err != nil {
				return st, err
			}
			for _, e := range list {
				if err := s.remove(ctx, e); err != nil {
					return st, err
				}
				st.Unused++
			}
			if len(list) < sweepBatch {
				break
			}
		}
	}
	n, err := s.Evict(ctx)
	st.Evicted = n
	if err != nil {
		return st, err
	}
	st.Orphans, err = blobs.CollectOrphans(ctx, s.blobs, "caches/", now.Add(-orphanGrace), s.db.CacheBlobKeys)
	return st, err
}
