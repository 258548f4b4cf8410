package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/dispatch"
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

func (s *Server) queue(w http.ResponseWriter, r *http.Request) {
	rows, err := s.db.ListQueue(r.Context())
	if err != nil {
		s.storeError(w, "list queue", err)
		return
	}
	agents := s.disp.Agents()
	out := apiv1.Queue{Jobs: []apiv1.QueueEntry{}}
	for _, e := range rows {
		job, err := s.db.GetJob(r.Context(), e.JobID)
		if err != nil {
			continue
		}
		out.Jobs = append(out.Jobs, apiv1.QueueEntry{
			JobID: e.JobID, RunID: e.RunID, Job: job.Name, Labels: e.Labels, Status: string(e.Status),
			AgentID: e.AgentID, Attempts: e.DispatchAttempts, Enqueued: e.EnqueuedAt,
			WhyPending: s.whyPending(e, agents),
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// whyPending says in words why a queue row waits, with the scaler's last
// answer for it when it was offered to the scaler.
func (s *Server) whyPending(e store.QueueEntry, agents []*dispatch.Agent) string {
	why := whyPending(e, agents)
	if e.Status == store.QueuePending {
		if st, ok := s.disp.ScaleStatusOf(e.JobID); ok {
			why = st.Why()
			if e.LastProvisioningError != "" {
				why += "; last provisioning error: " + e.LastProvisioningError
			}
		}
	}
	return why
}

// whyPending says in words why a queue row waits, from the queue and the
// connected agents alone.
func whyPending(e store.QueueEntry, agents []*dispatch.Agent) string {
	switch {
	case e.RecoveryDeadline != nil:
		return fmt.Sprintf("waiting for agent %s to reconnect and reclaim the job until %s", e.RecoveryAgentID, e.RecoveryDeadline.UTC().Format(time.RFC3339))
	case e.Status == store.QueueDispatched && e.AckDeadline != nil:
		return fmt.Sprintf("dispatched to agent %s, waiting for it to acknowledge (deadline %s)", e.AgentID, e.AckDeadline.UTC().Format(time.RFC3339))
	case e.Status == store.QueueDispatched:
		return fmt.Sprintf("running on agent %s", e.AgentID)
	}
	fitting, busy := 0, 0
	var drained []string
	for _, a := range agents {
		if covers(a.Labels, e.Labels) {
			fitting++
			switch {
			case a.Draining():
				drained = append(drained, a.ID)
			case len(a.BusyJobs()) >= a.Capacity:
				busy++
			}
		}
	}
	var why string
	switch {
	case fitting == 0:
		why = fmt.Sprintf("no connected agent has all of the labels %v", e.Labels)
	case len(drained) == fitting:
		why = fmt.Sprintf("waiting for a free agent: every agent with labels %v is drained (%s; kici-admin agents undrain ID)", e.Labels, strings.Join(drained, ", "))
	case busy+len(drained) == fitting:
		why = fmt.Sprintf("waiting for a free agent: all %d agents with labels %v are busy", fitting, e.Labels)
		if len(drained) > 0 {
			why = fmt.Sprintf("waiting for a free agent: of the %d agents with labels %v, %d are busy and %d drained (%s)",
				fitting, e.Labels, busy, len(drained), strings.Join(drained, ", "))
		}
	default:
		why = "about to be dispatched"
	}
	if e.LastProvisioningError != "" {
		why += "; last provisioning error: " + e.LastProvisioningError
	}
	if e.LastRequeueReason != "" {
		why += fmt.Sprintf("; requeued %d time(s), last because %s", e.DispatchAttempts, e.LastRequeueReason)
	}
	return why
}

func covers(have, need []string) bool {
	for _, n := range need {
		if !slices.Contains(have, n) {
			return false
		}
	}
	return true
}
