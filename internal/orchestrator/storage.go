package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/api"
	"github.com/kici-dev/kici/internal/artifacts"
	"github.com/kici-dev/kici/internal/blobs"
	"github.com/kici-dev/kici/internal/blobs/s3store"
	"github.com/kici-dev/kici/internal/caches"
	"github.com/kici-dev/kici/internal/metrics"
)

// blobStoreCheckTimeout bounds the check, at start, that an S3 bucket is
// reachable (the SDK's retries included).
const blobStoreCheckTimeout = 30 * time.Second

// s3Vars are the variables of an S3 blob store, which mean nothing
// without KICI_BLOB_STORE=s3://...
var s3Vars = []string{"KICI_S3_ENDPOINT", "KICI_S3_REGION", "KICI_S3_ACCESS_KEY_ID", "KICI_S3_SECRET_ACCESS_KEY"}

// StorageConfig says where the orchestrator keeps the artifacts and caches
// of jobs, and bounds them. Zero values mean the defaults of the
// artifacts and caches packages.
type StorageConfig struct {
	// S3, when not nil, keeps the blobs in an S3-compatible bucket shared
	// by every coordinator (KICI_BLOB_STORE=s3://BUCKET/PREFIX and the
	// KICI_S3_* variables). Nil keeps them under DataDir/blobs
	// (KICI_BLOB_STORE=dir, the default), which is per node.
	S3 *s3store.Config
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
	s3, err := blobStoreFromEnv(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	c.S3 = s3
	return c, errs
}

// blobStoreFromEnv reads KICI_BLOB_STORE and, for an s3:// URL, the
// KICI_S3_* variables; nil means the data dir. Its errors name the
// variable and never show the secret key.
func blobStoreFromEnv(getenv func(string) string) (*s3store.Config, error) {
	v := getenv("KICI_BLOB_STORE")
	if v == "" || v == "dir" {
		for _, name := range s3Vars {
			if getenv(name) != "" {
				return nil, fmt.Errorf("%s is set, but KICI_BLOB_STORE is not an s3:// URL: set KICI_BLOB_STORE=s3://BUCKET[/PREFIX] to use it, or unset it", name)
			}
		}
		return nil, nil
	}
	if !strings.HasPrefix(v, "s3://") {
		return nil, fmt.Errorf("KICI_BLOB_STORE=%q: want dir (the data dir, the default) or s3://BUCKET[/PREFIX]", v)
	}
	bucket, prefix, err := s3store.ParseURL(v)
	if err != nil {
		return nil, fmt.Errorf("KICI_BLOB_STORE=%q: %w", v, err)
	}
	c := &s3store.Config{Bucket: bucket, Prefix: prefix, Region: getenv("KICI_S3_REGION"),
		AccessKeyID: getenv("KICI_S3_ACCESS_KEY_ID"), SecretAccessKey: getenv("KICI_S3_SECRET_ACCESS_KEY")}
	if e := getenv("KICI_S3_ENDPOINT"); e != "" {
		if c.Endpoint, err = s3store.ParseEndpoint(e); err != nil {
			return nil, fmt.Errorf("KICI_S3_ENDPOINT=%q: %w", e, err)
		}
	}
	switch {
	case c.AccessKeyID == "":
		return nil, errors.New("KICI_S3_ACCESS_KEY_ID: required with KICI_BLOB_STORE=s3://...")
	case c.SecretAccessKey == "":
		return nil, errors.New("KICI_S3_SECRET_ACCESS_KEY: required with KICI_BLOB_STORE=s3://...")
	}
	return c, nil
}

// openBlobStore returns the blob store sc describes, checking that its
// bucket is reachable, or the directory DataDir/blobs when sc is nil.
func openBlobStore(ctx context.Context, dataDir string, sc *s3store.Config) (blobs.Store, error) {
	if sc == nil {
		return blobs.NewDir(filepath.Join(dataDir, "blobs"))
	}
	st, err := s3store.New(*sc)
	if err != nil {
		return nil, fmt.Errorf("KICI_BLOB_STORE: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, blobStoreCheckTimeout)
	defer cancel()
	if err := st.Check(ctx); err != nil {
		return nil, fmt.Errorf("blob store %s is not reachable; check KICI_BLOB_STORE, KICI_S3_ENDPOINT, KICI_S3_REGION, KICI_S3_ACCESS_KEY_ID and KICI_S3_SECRET_ACCESS_KEY: %w", st, err)
	}
	return st, nil
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

// buildStorage makes the artifacts and caches services on the blob store
// (DataDir/blobs, or an S3 bucket) and hands them to the API's
// configuration.
func (s *Server) buildStorage(ctx context.Context, apiCfg *api.Config) error {
	sc := s.cfg.Storage
	bs, err := openBlobStore(ctx, s.cfg.DataDir, sc.S3)
	if err != nil {
		return err
	}
	s.log.Info("blob store for artifacts and caches", "blob_store", fmt.Sprint(bs))
	obs := storageObserver{s.metrics}
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
	if s.cfg.ClusterRole == RoleCoordinator && sc.S3 == nil {
		s.log.Warn("artifacts and caches are kept in this coordinator's data dir: a job whose requests reach another coordinator cannot read them; set KICI_BLOB_STORE to an s3:// bucket they all share (docs/orchestrator.md, \"Artifacts and caches\")")
	}
	s.storage = storage{artifacts: a, caches: c}
	apiCfg.Artifacts, apiCfg.Caches = a, c
	return nil
}

// sweepStorage deletes expired artifacts, artifacts of deleted runs,
// unused cache entries, cache entries past the size cap and orphaned
// blobs, at start and then every RetentionSweepInterval, until ctx ends.
// Every orchestrator sweeps: a data dir's blobs are its own, and
// coordinators that share a bucket share the database too, so two
// deleting the same row or blob do no harm.
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
