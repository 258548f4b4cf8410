package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/artifacts"
	"github.com/kici-dev/kici/internal/blobs"
	"github.com/kici-dev/kici/internal/caches"
	"github.com/kici-dev/kici/internal/store"
)

// streamedBodies are the routes whose request body is a bundle: the guard
// leaves their bodies unbounded by maxJSONBody, and the artifacts and
// caches services bound them by their own limits.
var streamedBodies = map[string]bool{
	"PUT /api/v1/runs/{id}/jobs/{job}/artifacts": true,
	"PUT /api/v1/caches":                         true,
}

// streamsBody reports whether route pattern takes a bundle as its body.
func streamsBody(pattern string) bool { return streamedBodies[pattern] }

// sha256RE is a lowercase hex SHA-256.
var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// maxParentRuns bounds how far back through reruns an upstream job's
// artifacts are looked for.
const maxParentRuns = 10

func toAPIArtifact(a store.Artifact) apiv1.Artifact {
	out := apiv1.Artifact{ID: a.ID, Job: a.JobName, JobID: a.JobID, Size: a.Size, SHA256: a.SHA256, FileCount: a.FileCount,
		ContentBytes: a.ContentBytes, Files: []apiv1.ArtifactFile{}, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt}
	for _, f := range a.Files {
		out.Files = append(out.Files, apiv1.ArtifactFile{Path: f.Path, Size: f.Size})
	}
	return out
}

// bundleSHA256 reads the digest header of an upload, answering 400 when
// it is missing or malformed.
func bundleSHA256(w http.ResponseWriter, r *http.Request) (string, bool) {
	sum := r.Header.Get(apiv1.HeaderSHA256)
	if !sha256RE.MatchString(sum) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("header %s: want the body's SHA-256 as 64 lowercase hex digits, got %q", apiv1.HeaderSHA256, sum))
		return "", false
	}
	return sum, true
}

// uploadArtifacts receives the artifacts bundle of the job whose token
// the request carries, which must be job {job} of run {id}.
func (s *Server) uploadArtifacts(w http.ResponseWriter, r *http.Request) {
	job, run, ok := s.jobCaller(w, r)
	if !ok {
		return
	}
	if s.cfg.Artifacts == nil {
		writeError(w, http.StatusServiceUnavailable, "this orchestrator keeps no artifacts")
		return
	}
	if run.ID != r.PathValue("id") || (job.ID != r.PathValue("job") && job.Name != r.PathValue("job")) {
		writeError(w, http.StatusForbidden, "a job token lets a job upload its own artifacts only")
		return
	}
	spec := job.Spec.Artifacts
	if spec == nil {
		writeError(w, http.StatusConflict, fmt.Sprintf("job %q declares no artifacts", job.Name))
		return
	}
	sum, ok := bundleSHA256(w, r)
	if !ok {
		return
	}
	a, err := s.cfg.Artifacts.Upload(r.Context(), artifacts.Upload{RunID: run.ID, JobID: job.ID, JobName: job.Name, SHA256: sum,
		Size: r.ContentLength, Expire: time.Duration(spec.ExpireMS) * time.Millisecond}, r.Body)
	if err != nil {
		s.bundleError(w, fmt.Sprintf("artifacts of job %q", job.Name), err)
		return
	}
	writeJSON(w, http.StatusCreated, toAPIArtifact(a))
}

// bundleError answers a refused or failed upload of a bundle.
func (s *Server) bundleError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, artifacts.ErrBusy), errors.Is(err, caches.ErrBusy):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, what+": "+err.Error()+"; try again shortly")
	case errors.Is(err, blobs.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, what+": "+err.Error())
	case errors.Is(err, blobs.ErrDigestMismatch), errors.Is(err, artifacts.ErrBadBundle):
		writeError(w, http.StatusBadRequest, what+": "+err.Error())
	case errors.Is(err, context.Canceled):
	default:
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, what+": "+err.Error())
			return
		}
		s.log.Error("store bundle failed", "what", what, "error", err)
		writeError(w, http.StatusInternalServerError, what+": internal error (see the orchestrator log)")
	}
}

// fetchUpstreamArtifacts serves the artifacts bundle of job {job} of run
// {id} to a job of that run that needs {job}.
func (s *Server) fetchUpstreamArtifacts(w http.ResponseWriter, r *http.Request) {
	job, run, ok := s.jobCaller(w, r)
	if !ok {
		return
	}
	if s.cfg.Artifacts == nil {
		writeError(w, http.StatusServiceUnavailable, "this orchestrator keeps no artifacts")
		return
	}
	upstream := r.PathValue("job")
	needed := false
	for _, n := range job.Spec.Needs {
		needed = needed || n.Job == upstream
	}
	if run.ID != r.PathValue("id") || !needed {
		writeError(w, http.StatusForbidden, fmt.Sprintf("a job token lets a job fetch the artifacts of the jobs it needs only, in its own run; job %q does not need %q", job.Name, upstream))
		return
	}
	a, err := s.upstreamArtifact(r.Context(), run, upstream)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("job %q of run %q has no artifacts", upstream, run.ID))
		return
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("artifacts of job %q", upstream), err)
		return
	}
	s.serveArtifact(w, r, a)
}

// upstreamArtifact returns the artifact of job name of run; for a job a
// rerun copied from its parent run (never dispatched in run), the
// artifact it had there.
func (s *Server) upstreamArtifact(ctx context.Context, run store.Run, name string) (store.Artifact, error) {
	for range maxParentRuns {
		a, err := s.db.GetArtifact(ctx, run.ID, name)
		if !errors.Is(err, store.ErrNotFound) || run.ParentRunID == "" {
			return a, err
		}
		j, err := s.db.GetRunJob(ctx, run.ID, name)
		if err != nil {
			return store.Artifact{}, err
		}
		if j.Attempt > 0 {
			return store.Artifact{}, store.ErrNotFound // it ran here, and uploaded nothing
		}
		if run, err = s.db.GetRunHead(ctx, run.ParentRunID); err != nil {
			return store.Artifact{}, err
		}
	}
	return store.Artifact{}, store.ErrNotFound
}

// serveArtifact streams a's bundle. A bundle found corrupt on the way
// breaks the connection off, so the client never takes a short or
// damaged body for a whole one (it checks the digest header too).
func (s *Server) serveArtifact(w http.ResponseWriter, r *http.Request, a store.Artifact) {
	rc, err := s.cfg.Artifacts.Open(r.Context(), a)
	if err != nil {
		s.log.Error("open artifact failed", "run_id", a.RunID, "job", a.JobName, "key", a.BlobKey, "error", err)
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("artifacts of job %q: the stored bundle cannot be read (see the orchestrator log)", a.JobName))
		return
	}
	defer rc.Close()
	serveBundle(w, s, rc, a.Size, a.SHA256)
}

// serveBundle sends a bundle of size bytes and digest sum.
func serveBundle(w http.ResponseWriter, s *Server, rc io.Reader, size int64, sum string) {
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.Header().Set(apiv1.HeaderSHA256, sum)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		if errors.Is(err, blobs.ErrDigestMismatch) {
			s.log.Error("stored bundle is corrupt", "error", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// listArtifacts lists the artifacts of run {id} (of job ?job= alone).
func (s *Server) listArtifacts(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.db.GetRunHead(r.Context(), id); err != nil {
		s.storeError(w, fmt.Sprintf("run %q", id), err)
		return
	}
	list, err := s.db.ListArtifacts(r.Context(), id)
	if err != nil {
		s.storeError(w, fmt.Sprintf("artifacts of run %q", id), err)
		return
	}
	job := r.URL.Query().Get("job")
	out := apiv1.ArtifactList{Artifacts: []apiv1.Artifact{}}
	for _, a := range list {
		if job == "" || a.JobName == job || a.JobID == job {
			out.Artifacts = append(out.Artifacts, toAPIArtifact(a))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// downloadArtifacts serves the artifacts bundle of job {job} (its name or
// id) of run {id}.
func (s *Server) downloadArtifacts(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Artifacts == nil {
		writeError(w, http.StatusServiceUnavailable, "this orchestrator keeps no artifacts")
		return
	}
	id, key := r.PathValue("id"), r.PathValue("job")
	job, err := s.db.GetRunJob(r.Context(), id, key)
	if errors.Is(err, store.ErrNotFound) {
		if _, rerr := s.db.GetRunHead(r.Context(), id); rerr != nil {
			s.storeError(w, fmt.Sprintf("run %q", id), rerr)
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("run %q has no job %q", id, key))
		return
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("run %q", id), err)
		return
	}
	a, err := s.db.GetArtifact(r.Context(), id, job.Name)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("job %q of run %q has no artifacts", job.Name, id))
		return
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("artifacts of job %q", job.Name), err)
		return
	}
	s.serveArtifact(w, r, a)
}
