package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
)

// jobCaller authenticates the job token of a job-token route's request:
// it must name the attempt of a job that is still running. It returns
// that job, its spec decoded, and its run; otherwise it answers (401 for
// a bad token, 403 for a job that is not running, 5xx when the store
// cannot say) and returns false.
func (s *Server) jobCaller(w http.ResponseWriter, r *http.Request) (store.Job, store.Run, bool) {
	token, _ := bearerToken(r)
	jobID, attempt, err := s.tokens.Check(token)
	if err != nil {
		writeError(w, http.StatusUnauthorized, "job token missing or invalid")
		return store.Job{}, store.Run{}, false
	}
	// A store error is the orchestrator's fault, not the token's: it gets
	// a 5xx, which the agent retries, never a 403, which it does not.
	job, err := s.db.GetJobHead(r.Context(), jobID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.storeError(w, fmt.Sprintf("job %q", jobID), err)
		return store.Job{}, store.Run{}, false
	}
	if err != nil || job.Attempt != attempt || runstate.JobTerminal(job.Status) {
		writeError(w, http.StatusForbidden, "the job token's job is not running")
		return store.Job{}, store.Run{}, false
	}
	if err := job.DecodeSpec(); err != nil {
		s.storeError(w, fmt.Sprintf("job %q", jobID), err)
		return store.Job{}, store.Run{}, false
	}
	run, err := s.db.GetRunHead(r.Context(), job.RunID)
	if err != nil {
		s.storeError(w, fmt.Sprintf("run %q", job.RunID), err)
		return store.Job{}, store.Run{}, false
	}
	return job, run, true
}
