package api

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/caches"
	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
)

// versionRE is a cache version: a hex digest of the cache's paths.
var versionRE = regexp.MustCompile(`^[0-9a-f]{16,64}$`)

// cacheCaller authenticates a cache route's job token and returns the
// job's run and the scopes it reads and writes; a job that declares no
// cache is refused.
func (s *Server) cacheCaller(w http.ResponseWriter, r *http.Request) (store.Run, caches.Scopes, bool) {
	job, run, ok := s.jobCaller(w, r)
	if !ok {
		return store.Run{}, caches.Scopes{}, false
	}
	if s.cfg.Caches == nil {
		writeError(w, http.StatusServiceUnavailable, "this orchestrator keeps no caches")
		return store.Run{}, caches.Scopes{}, false
	}
	if len(job.Spec.Cache) == 0 {
		writeError(w, http.StatusConflict, fmt.Sprintf("job %q declares no cache", job.Name))
		return store.Run{}, caches.Scopes{}, false
	}
	rec, err := scheduler.DecodeRecord(run.Event)
	if err != nil {
		s.storeError(w, fmt.Sprintf("run %q", run.ID), err)
		return store.Run{}, caches.Scopes{}, false
	}
	return run, caches.ScopesOf(rec.Event, s.cfg.Caches.DefaultBranch()), true
}

// cacheKeys reads and checks the key and version of a cache request.
func cacheKeys(w http.ResponseWriter, r *http.Request) (key, version string, ok bool) {
	q := r.URL.Query()
	key, version = q.Get("key"), q.Get("version")
	switch {
	case key == "" || len(key) > caches.MaxKeyLen:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("key: want 1 to %d bytes, got %d", caches.MaxKeyLen, len(key)))
	case !versionRE.MatchString(version):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("version %q: want 16 to 64 lowercase hex digits", version))
	default:
		return key, version, true
	}
	return "", "", false
}

// lookupCache finds the entry a job asks for: ?key=K&version=V, and
// ?restore=PREFIX for each restore key, in order.
func (s *Server) lookupCache(w http.ResponseWriter, r *http.Request) {
	run, scopes, ok := s.cacheCaller(w, r)
	if !ok {
		return
	}
	key, version, ok := cacheKeys(w, r)
	if !ok {
		return
	}
	restore := r.URL.Query()["restore"]
	if len(restore) > workflow.MaxRestoreKeys {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("restore: %d keys, over the limit of %d", len(restore), workflow.MaxRestoreKeys))
		return
	}
	for _, k := range restore {
		if k == "" || len(k) > caches.MaxKeyLen {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("restore: want keys of 1 to %d bytes", caches.MaxKeyLen))
			return
		}
	}
	e, exact, err := s.cfg.Caches.Lookup(r.Context(), caches.Query{Source: run.Source, Read: scopes.Read, Key: key, Version: version, RestoreKeys: restore})
	if errors.Is(err, caches.ErrMiss) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		s.storeError(w, "cache lookup", err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.CacheHit{ID: e.ID, Key: e.Key, Exact: exact, Scope: e.Scope, Size: e.Size, SHA256: e.SHA256})
}

// fetchCache serves the bundle of entry {id}, if the job's run may read
// its scope.
func (s *Server) fetchCache(w http.ResponseWriter, r *http.Request) {
	run, scopes, ok := s.cacheCaller(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	e, err := s.db.GetCacheEntry(r.Context(), id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.storeError(w, fmt.Sprintf("cache entry %q", id), err)
		return
	}
	// An entry of another scope reads as missing: its existence is not
	// the job's business.
	if err != nil || !caches.Readable(e, run.Source, scopes.Read) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no cache entry %q that this job may read", id))
		return
	}
	rc, err := s.cfg.Caches.Open(r.Context(), e)
	if err != nil {
		s.log.Error("open cache entry failed", "id", e.ID, "key", e.BlobKey, "error", err)
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("cache entry %q: the stored bundle cannot be read (see the orchestrator log)", id))
		return
	}
	defer rc.Close()
	serveBundle(w, s, rc, e.Size, e.SHA256)
}

// saveCache stores a job's cache bundle under ?key=K&version=V, in its
// run's own scope: never another, whatever the job asks.
func (s *Server) saveCache(w http.ResponseWriter, r *http.Request) {
	run, scopes, ok := s.cacheCaller(w, r)
	if !ok {
		return
	}
	key, version, ok := cacheKeys(w, r)
	if !ok {
		return
	}
	sum, ok := bundleSHA256(w, r)
	if !ok {
		return
	}
	e, err := s.cfg.Caches.Save(r.Context(), caches.Save{Source: run.Source, Scope: scopes.Write, Key: key, Version: version,
		RunID: run.ID, SHA256: sum, Size: r.ContentLength}, r.Body)
	if err != nil {
		s.bundleError(w, fmt.Sprintf("cache entry %q", key), err)
		return
	}
	writeJSON(w, http.StatusCreated, apiv1.CacheSaved{ID: e.ID, Scope: e.Scope, Size: e.Size})
}
