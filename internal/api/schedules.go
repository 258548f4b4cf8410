package api

import (
	"context"
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
)

// ScheduleLister is what the API needs to answer GET /api/v1/schedules:
// the schedule triggers the orchestrator's scheduler keeps in its cache,
// each with its next tick and last run, and the sources whose schedules
// could not be read. ListSchedules must not read git: it answers from the
// cache, and may be called concurrently with itself and with the
// scheduler's refreshes. An error is an internal one (the API answers 500
// and logs it); a source that could not be read is a Problem, not an
// error. The handler filters the list it returns and never changes it in
// place, so the lister may hand out a shared copy.
type ScheduleLister interface {
	ListSchedules(ctx context.Context) (apiv1.ScheduleList, error)
}

// listSchedules answers GET /api/v1/schedules with the lister's list,
// limited to one source by ?source=NAME (an exact name; the problems are
// filtered too). Schedules is never null.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Schedules == nil {
		writeError(w, http.StatusServiceUnavailable, "schedules are not available on this orchestrator")
		return
	}
	list, err := s.cfg.Schedules.ListSchedules(r.Context())
	if err != nil {
		s.storeError(w, "list schedules", err)
		return
	}
	if source := r.URL.Query().Get("source"); source != "" {
		list = filterSchedules(list, source)
	}
	if list.Schedules == nil {
		list.Schedules = []apiv1.Schedule{}
	}
	writeJSON(w, http.StatusOK, list)
}

// filterSchedules returns the schedules and problems of source only, in
// new slices: list's own are left as they were.
func filterSchedules(list apiv1.ScheduleList, source string) apiv1.ScheduleList {
	out := apiv1.ScheduleList{Schedules: []apiv1.Schedule{}, RefreshedAt: list.RefreshedAt}
	for _, sc := range list.Schedules {
		if sc.Source == source {
			out.Schedules = append(out.Schedules, sc)
		}
	}
	for _, p := range list.Problems {
		if p.Source == source {
			out.Problems = append(out.Problems, p)
		}
	}
	return out
}
