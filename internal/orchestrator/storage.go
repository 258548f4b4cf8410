package orchestrator

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kici-dev/kici/internal/api"
	"github.com/kici-dev/kici/internal/artifacts"
	"github.com/kici-dev/kici/internal/blobs"
	"github.com/kici-dev/kici/internal/caches"
	"github.com/kici-dev/kici/internal/metrics"
)

// StorageConfig bounds the artifacts and caches the orchestrator keeps
// for jobs under DataDir/blobs. Zero values mean the defaults of the
// artifacts and caches packages.
type StorageConfig struct {
	// ArtifactMaxBytes bounds one job's artifact bundle as stored
	// (KICI_ARTIFACT_MAX_BYTES); ArtifactMaxRunBytes all of a run's
	// (KICI_ARTIFACT_MAX_RUN_BYTES).
	ArtifactMaxBytes    int64
	ArtifactMaxRunBytes int64
	// CacheMaxBytes bounds all cache entries, the least recently used
	// evicted past it (KICI_CACHE_MAX_BYTES); CacheMaxEntryBytes one
	// entry (KICI_CACHE_MAX_ENTRY_BYTES).
	CacheMaxBytes      int64
	CacheMaxEntryBytes int64
	// CacheMaxUnused deletes entries no job restored for this long
	// (KICI_CACHE_MAX_UNUSED_DAYS); negative never.
	CacheMaxUnused time.Duration
	// CacheDefaultBranch is the branch whose caches every run falls back
	// to (KICI_CACHE_DEFAULT_BRANCH).
	CacheDefaultBranch string
}

// storageFromEnv reads the storage settings, with the defaults of the
// artifacts and caches packages.
func storageFromEnv(getenv func(string) string) (StorageConfig, []error) {
	c := StorageConfig{
		ArtifactMaxBytes: artifacts.DefaultMaxBytes, ArtifactMaxRunBytes: artifacts.DefaultMaxRunBytes,
		CacheMaxBytes: caches.DefaultMaxBytes, CacheMaxEntryBytes: caches.DefaultMaxEntryBytes,
		CacheMaxUnused: caches.DefaultMaxUnused, CacheDefaultBranch: caches.DefaultBranch,
	}
	var errs []error
	bytes := func(name string, dst *int64) {
		v := getenv(name)
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number of bytes >= 1", name, v))
			return
		}
		*dst = n
	}
	bytes("KICI_ARTIFACT_MAX_BYTES", &c.ArtifactMaxBytes)
	bytes("KICI_ARTIFACT_MAX_RUN_BYTES", &c.ArtifactMaxRunBytes)
	bytes("KICI_CACHE_MAX_BYTES", &c.CacheMaxBytes)
	bytes("KICI_CACHE_MAX_ENTRY_BYTES", &c.CacheMaxEntryBytes)
	if getenv("KICI_CACHE_MAX_BYTES") != "" && getenv("KICI_CACHE_MAX_ENTRY_BYTES") == "" {
		c.CacheMaxEntryBytes = min(c.CacheMaxEntryBytes, c.CacheMaxBytes)
	}
	if c.CacheMaxEntryBytes > c.CacheMaxBytes {
		errs = append(errs, fmt.Errorf("KICI_CACHE_MAX_ENTRY_BYTES=%d is over KICI_CACHE_MAX_BYTES=%d", c.CacheMaxEntryBytes, c.CacheMaxBytes))
	}
	if v := getenv("KICI_CACHE_MAX_UNUSED_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0:
			errs = append(errs, fmt.Errorf("KICI_CACHE_MAX_UNUSED_DAYS=%q: want a whole number of days >= 0 (0 = never)", v))
		case n == 0:
			c.CacheMaxUnused = -1
		default:
			c.CacheMaxUnused = time.Duration(n) * 24 * time.Hour
		}
	}
	if v := getenv("KICI_CACHE_DEFAULT_BRANCH"); v != "" {
		c.CacheDefaultBranch = v
	}
	return c, errs
}

// storage is the orchestrator's artifacts and caches.
type storage struct {
	artifacts *artifacts.Service
	caches    *caches.Service
}

// storageObserver passes the services' events to the metrics registry.
type storageObserver struct{ m *metrics.Registry }

func (o storageObserver) ArtifactStored(n int64) { o.m.ArtifactStored(n) }
func (o storageObserver) CacheLookup(r string)   { o.m.CacheLookup(r) }
func (o storageObserver) CacheBytes(n int64)     { o.m.CacheBytes(n) }

// buildStorage makes the artifacts and caches services on a blob store
// in DataDir/blobs and hands them to the API's configuration.
func (s *Server) buildStorage(ctx context.Context, apiCfg *api.Config) error {
	bs, err := blobs.NewDir(filepath.Join(s.cfg.DataDir, "blobs"))
	if err != nil {
		return err
	}
	obs := storageObserver{s.metrics}
	sc := s.cfg.Storage
	a, err := artifacts.New(s.log.With("component", "artifacts"), s.db, bs, artifacts.Config{
		MaxBytes: sc.ArtifactMaxBytes, MaxRunBytes: sc.ArtifactMaxRunBytes, Observer: obs})
	if err != nil {
		return err
	}
	c, err := caches.New(s.log.With("component", "caches"), s.db, bs, caches.Config{
		MaxBytes: sc.CacheMaxBytes, MaxEntryBytes: sc.CacheMaxEntryBytes, MaxUnused: sc.CacheMaxUnused,
		DefaultBranch: sc.CacheDefaultBranch, Observer: obs})
	if err != nil {
		return err
	}
	if n, err := s.db.CacheBytes(ctx); err == nil {
		s.metrics.CacheBytes(n)
	}
	if s.cfg.ClusterRole == RoleCoordinator {
		s.log.Warn("artifacts and caches are kept in this coordinator's data dir: a job whose requests reach another coordinator cannot read them (docs/orchestrator.md, \"Artifacts and caches\")")
	}
	s.storage = storage{artifacts: a, caches: c}
	apiCfg.Artifacts, apiCfg.Caches = a, c
	return nil
}

// sweepStorage deletes expired artifacts, artifacts of deleted runs,
// unused cache entries, cache entries past the size cap and orphaned
// blobs, at start and then every RetentionSweepInterval, until ctx ends.
// Every orchestrator sweeps (its blobs are its own); two deleting the
// same row do no harm.
func (s *Server) sweepStorage(ctx context.Context) {
	interval := s.cfg.RetentionSweepInterval
	if interval <= 0 {
		interval = DefaultRetentionSweep
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		now := time.Now()
		if st, err := s.storage.artifacts.Sweep(ctx, now); err != nil && ctx.Err() == nil {
			s.log.Error("storage sweep: artifacts", "error", err)
		} else if st.Artifacts+st.Orphans > 0 {
			s.log.Info("storage sweep: artifacts deleted", "artifacts", st.Artifacts, "orphan_blobs", st.Orphans)
		}
		if st, err := s.storage.caches.Sweep(ctx, now); err != nil && ctx.Err() == nil {
			s.log.Error("storage sweep: caches", "error", err)
		} else if st.Unused+st.Evicted+st.Orphans > 0 {
			s.log.Info("storage sweep: cache entries deleted", "unused", st.Unused, "evicted", st.Evicted, "orphan_blobs", st.Orphans)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
