package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/store"
)

func (s *Server) agents(w http.ResponseWriter, r *http.Request) {
	out := apiv1.AgentList{Agents: []apiv1.Agent{}, Drains: []apiv1.AgentDrain{}}
	for _, a := range s.disp.Agents() {
		out.Agents = append(out.Agents, apiv1.Agent{ID: a.ID, Labels: a.Labels, BusyJobs: a.BusyJobs(), Backend: a.Backend,
			Version: a.Version, Hostname: a.Hostname, ConnectedAt: a.ConnectedAt, Draining: a.Draining()})
	}
	for _, d := range s.disp.Drains() {
		out.Drains = append(out.Drains, toAPIDrain(d))
	}
	writeJSON(w, http.StatusOK, out)
}

func toAPIDrain(d store.AgentDrain) apiv1.AgentDrain {
	return apiv1.AgentDrain{AgentID: d.AgentID, Reason: d.Reason, DrainedBy: d.DrainedBy, DrainedAt: d.DrainedAt}
}

// maxDrainReason bounds a drain's reason, which the agent list and every
// why_pending of the agent's labels repeat.
const maxDrainReason = 500

// drainAgent drains an agent, connected or not: it takes no new job.
func (s *Server) drainAgent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	audited(r, "agent:"+id, "")
	var in apiv1.AgentDrainRequest
	if r.ContentLength != 0 && !decodeJSON(w, r, &in) { // the body (a reason) is optional
		return
	}
	if len(in.Reason) > maxDrainReason {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reason: %d bytes, at most %d", len(in.Reason), maxDrainReason))
		return
	}
	if strings.TrimSpace(id) == "" || len(id) > 200 {
		writeError(w, http.StatusBadRequest, "agent id: want 1 to 200 characters")
		return
	}
	d, err := s.disp.Drain(r.Context(), id, in.Reason, principal(r).Name)
	if err != nil {
		s.storeError(w, fmt.Sprintf("agent %q", id), err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIDrain(d))
}

// undrainAgent lifts an agent's drain.
func (s *Server) undrainAgent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	audited(r, "agent:"+id, "")
	err := s.disp.Undrain(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("agent %q is not drained", id))
		return
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("agent %q", id), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
