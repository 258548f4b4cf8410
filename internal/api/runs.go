package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/logs"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
)

// runStatuses are the statuses a run can have, for the status filter.
var runStatuses = []store.RunStatus{store.RunAwaitingApproval, store.RunPending, store.RunRunning, store.RunSuccess, store.RunFailure, store.RunCancelled}

func toAPIRun(run store.Run) apiv1.Run {
	out := apiv1.Run{
		ID: run.ID, Source: run.Source, Workflow: run.Workflow, Event: run.Event, Actor: eventActor(run.Event), Ref: run.Ref, SHA: run.SHA,
		Status: string(run.Status), Error: run.Error, ParentRun: run.ParentRunID,
		CreatedAt: run.CreatedAt, StartedAt: run.StartedAt, FinishedAt: run.FinishedAt,
	}
	for _, j := range run.Jobs {
		aj := apiv1.Job{ID: j.ID, Name: j.Name, Status: string(j.Status), RunsOn: j.RunsOn, AgentID: j.AgentID,
			Error: j.Error, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, Attempt: j.Retries + 1, QueuedAt: j.QueuedAt,
			Steps: []apiv1.Step{}}
		if aj.RunsOn == nil {
			aj.RunsOn = []string{}
		}
		for _, st := range j.Steps {
			aj.Steps = append(aj.Steps, apiv1.Step{Index: st.Index, Name: st.Name, Status: string(st.Status), ExitCode: st.ExitCode, Error: st.Error,
				StartedAt: st.StartedAt, FinishedAt: st.FinishedAt})
		}
		for _, n := range j.Spec.Needs {
			aj.Needs = append(aj.Needs, n.Job)
		}
		out.Jobs = append(out.Jobs, aj)
	}
	return out
}

// eventActor is the "actor" of a run's stored event; "" when it has none
// or cannot be read.
func eventActor(raw json.RawMessage) string {
	var ev struct {
		Actor string `json:"actor"`
	}
	if json.Unmarshal(raw, &ev) != nil {
		return ""
	}
	return ev.Actor
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.RunFilter{Status: store.RunStatus(q.Get("status")), Source: q.Get("source"),
		Workflow: q.Get("workflow"), Branch: strings.TrimPrefix(q.Get("branch"), "refs/heads/"), Limit: 50}
	if f.Status != "" && !slices.Contains(runStatuses, f.Status) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("status %q: want one of awaiting_approval, pending, running, success, failure, cancelled", f.Status))
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want 1 to 1000", v))
			return
		}
		f.Limit = n
	}
	runs, err := s.db.ListRuns(r.Context(), f)
	if err != nil {
		s.storeError(w, "list runs", err)
		return
	}
	out := apiv1.RunList{Runs: []apiv1.Run{}}
	for _, run := range runs {
		out.Runs = append(out.Runs, toAPIRun(run))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.db.GetRun(r.Context(), r.PathValue("id"))
	if err != nil {
		s.storeError(w, fmt.Sprintf("run %q", r.PathValue("id")), err)
		return
	}
	out := toAPIRun(run)
	if err := s.markHeldJobs(r.Context(), &out); err != nil {
		s.storeError(w, fmt.Sprintf("run %q", r.PathValue("id")), err)
		return
	}
	if err := s.addPreviousAttempts(r.Context(), run, &out); err != nil {
		s.storeError(w, fmt.Sprintf("run %q", r.PathValue("id")), err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	audited(r, "run:"+id, "")
	var in apiv1.CancelRequest
	if r.ContentLength != 0 && !decodeJSON(w, r, &in) {
		return
	}
	// A run that has ended has nothing to cancel: say so, rather than
	// answer 200 as if a cancel had happened. (One that ends between this
	// read and the cancel is answered with its final state.)
	run, err := s.db.GetRun(r.Context(), id)
	if err != nil {
		s.storeError(w, fmt.Sprintf("run %q", id), err)
		return
	}
	if runstate.RunTerminal(run.Status) {
		writeError(w, http.StatusConflict, fmt.Sprintf("run %q has already ended (%s)", id, run.Status))
		return
	}
	run, err = s.disp.Cancel(r.Context(), id, in.Force, "cancelled by request")
	if err != nil {
		s.storeError(w, fmt.Sprintf("run %q", id), err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIRun(run))
}

// approveRun starts a run that awaits approval (a fork's pull request under
// the fork policy approve) with its source's secrets. A run in any other
// status gets 409.
func (s *Server) approveRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p := principal(r)
	approver := p.Name
	if approver == "" {
		approver = p.ID
	}
	audited(r, "run:"+id, "approved by "+approver)
	run, err := s.pipe.Approve(r.Context(), id, approver)
	if errors.Is(err, scheduler.ErrNotAwaitingApproval) {
		status := "unknown"
		if cur, gerr := s.db.GetRun(r.Context(), id); gerr == nil {
			status = string(cur.Status)
		}
		writeError(w, http.StatusConflict, fmt.Sprintf("run %q is %s, not awaiting_approval, and none of its jobs awaits an approval: only a run awaiting approval, or one with a job held for its environment, can be approved", id, status))
		return
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("run %q", id), err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIRun(run))
}

func (s *Server) rerunRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	audited(r, "run:"+id, "")
	run, err := s.db.GetRun(r.Context(), id)
	if err != nil {
		s.storeError(w, fmt.Sprintf("run %q", id), err)
		return
	}
	// The agents of the new run fetch the code from the source: without
	// it the run could only fail.
	if _, err := s.db.GetSource(r.Context(), run.Source); errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusConflict, fmt.Sprintf("rerun of %q: source %q no longer exists (add it again to rerun)", id, run.Source))
		return
	} else if err != nil {
		s.storeError(w, fmt.Sprintf("source %q", run.Source), err)
		return
	}
	var in apiv1.RerunRequest
	if r.ContentLength != 0 && !decodeJSON(w, r, &in) {
		return
	}
	rerun := s.pipe.Rerun
	if in.Failed {
		rerun = s.pipe.RerunFailed
	}
	child, err := rerun(r.Context(), run)
	if errors.Is(err, scheduler.ErrRunNotEnded) || errors.Is(err, scheduler.ErrNothingFailed) {
		writeError(w, http.StatusConflict, fmt.Sprintf("rerun of the failed jobs of %q: %v", id, err))
		return
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("rerun of %q", id), err)
		return
	}
	audited(r, "", "new run "+child.ID)
	writeJSON(w, http.StatusCreated, apiv1.RunRef{ID: child.ID, Workflow: child.Workflow})
}

// findJob finds a job of a run by id or by name.
func findJob(run store.Run, key string) (store.Job, bool) {
	for _, j := range run.Jobs {
		if j.ID == key || j.Name == key {
			return j, true
		}
	}
	return store.Job{}, false
}

// jobLogs reads stored lines of one job from a cursor "<step>:<offset>",
// walking the steps in order (setup output first) when no step is given.
func (s *Server) jobLogs(w http.ResponseWriter, r *http.Request) {
	// Only the job is read, not its whole run: a page of a run of many
	// jobs reads each one's log.
	job, err := s.db.GetRunJob(r.Context(), r.PathValue("id"), r.PathValue("job"))
	if errors.Is(err, store.ErrNotFound) {
		if _, rerr := s.db.GetRunHead(r.Context(), r.PathValue("id")); rerr != nil {
			s.storeError(w, fmt.Sprintf("run %q", r.PathValue("id")), rerr)
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("run %q has no job %q", r.PathValue("id"), r.PathValue("job")))
		return
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("run %q", r.PathValue("id")), err)
		return
	}
	run := store.Run{ID: job.RunID}
	q, err := logsQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	first, last := apiv1.ProvisioningStep, len(job.Steps)-1
	if v := q.Get("step"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < apiv1.ProvisioningStep || n > last {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("step %q: want -2 (provisioning), -1 (setup) or 0 to %d", v, last))
			return
		}
		first, last = n, n
	}
	limit := 0 // logs.DefaultReadLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > logs.MaxReadLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want 1 to %d lines", v, logs.MaxReadLimit))
			return
		}
		limit = n
	}
	step, offset := first, int64(0)
	if v := q.Get("cursor"); v != "" {
		a, b, ok := strings.Cut(v, ":")
		n, err1 := strconv.Atoi(a)
		off, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || n < first || n > last || off < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("cursor %q: pass back the \"next\" of the previous page", v))
			return
		}
		step, offset = n, off
	}
	terminal := runstate.JobTerminal(job.Status)
	page := apiv1.LogPage{Lines: []apiv1.LogLine{}}
	for {
		lines, next, err := s.readStep(r, run.ID, job.ID, step, offset, limit)
		if errors.Is(err, logs.ErrBadCursor) {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if err != nil {
			s.storeError(w, "read logs", err)
			return
		}
		page.Lines = append(page.Lines, lines...)
		offset = next
		if len(lines) > 0 || step >= last || !terminal && !stepDone(job, step) {
			break
		}
		step, offset = step+1, 0
	}
	page.Next = fmt.Sprintf("%d:%d", step, offset)
	if terminal && step >= last {
		size := int64(0)
		if step >= logs.SetupStep {
			size, err = s.logs.Size(r.Context(), logs.StepKey{RunID: run.ID, JobID: job.ID, Step: step})
		} else {
			var evs []store.JobEvent
			evs, err = s.db.ListJobEvents(r.Context(), job.ID)
			size = int64(len(evs))
		}
		page.Done = err == nil && offset >= size
	}
	writeJSON(w, http.StatusOK, page)
}

// logsQuery reads the step and cursor parameters of a logs request. Unlike
// url.ParseQuery, which drops a pair it cannot decode (so that a garbage
// cursor read as no cursor and answered page 1), a value that does not
// decode or a parameter given twice is an error naming the parameter; a
// ';' is part of a value, not a separator. Other parameters are ignored.
func logsQuery(raw string) (url.Values, error) {
	q := url.Values{}
	for pair := range strings.SplitSeq(raw, "&") {
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil || key != "step" && key != "cursor" && key != "limit" {
			continue
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			if key == "cursor" {
				return nil, fmt.Errorf("cursor %q: does not decode (pass back the \"next\" of the previous page): %w", rawValue, err)
			}
			return nil, fmt.Errorf("%s %q: does not decode: %w", key, rawValue, err)
		}
		q[key] = append(q[key], value)
		if n := len(q[key]); n > 1 {
			return nil, fmt.Errorf("%s: given %d times, want it once", key, n)
		}
	}
	return q, nil
}

// readStep reads a step's stored lines from offset. The provisioning
// section (step -2) is the job's scaler events, one line each; its offset
// counts events.
func (s *Server) readStep(r *http.Request, runID, jobID string, step int, offset int64, limit int) ([]apiv1.LogLine, int64, error) {
	if step == apiv1.ProvisioningStep {
		evs, err := s.db.ListJobEvents(r.Context(), jobID)
		if err != nil {
			return nil, offset, err
		}
		if offset > int64(len(evs)) {
			return nil, offset, fmt.Errorf("%w: provisioning offset %d past %d events", logs.ErrBadCursor, offset, len(evs))
		}
		var out []apiv1.LogLine
		for _, ev := range evs[offset:] {
			out = append(out, apiv1.LogLine{Step: step, TS: ev.CreatedAt, Text: provisioningLine(ev)})
		}
		return out, int64(len(evs)), nil
	}
	lines, next, err := s.logs.Read(r.Context(), logs.StepKey{RunID: runID, JobID: jobID, Step: step}, offset, limit)
	if err != nil {
		return nil, offset, err
	}
	out := make([]apiv1.LogLine, 0, len(lines))
	for _, l := range lines {
		out = append(out, apiv1.LogLine{Step: step, TS: l.TS, Text: l.Text})
	}
	return out, next, nil
}

// provisioningLine renders one scaler event as a log line.
func provisioningLine(ev store.JobEvent) string {
	text := fmt.Sprintf("[%s] %s", ev.Type, ev.Detail)
	if ev.AgentID != "" {
		text += " (agent " + ev.AgentID + ")"
	}
	return text
}

// stepDone reports whether nothing more will be written to a step's log.
func stepDone(job store.Job, step int) bool {
	if step == apiv1.ProvisioningStep {
		return job.Status != store.JobQueued && job.Status != store.JobWaiting
	}
	if step < 0 {
		return len(job.Steps) > 0 && job.Steps[0].Status != store.StepPending
	}
	return step < len(job.Steps) && runstate.StepTerminal(job.Steps[step].Status)
}

// runEvents streams a run's status changes and log lines as Server-Sent
// Events, starting with the run's current status, and ends after the run
// reaches a final status. With a start position (Last-Event-ID, else
// from=; see eventStream) it first sends each job's status and the stored
// lines past the position; a start position that is not one in the run's
// logs is a 400.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	// Subscribe before anything is read, so that no event falls between
	// what is read and what is followed.
	events, stop := s.logs.Subscribe(id)
	st := &eventStream{s: s, ctx: r.Context(), w: w, flusher: flusher, runID: id, events: events, stop: stop}
	defer func() { st.stop() }()
	run, err := s.db.GetRun(r.Context(), id)
	if err != nil {
		s.storeError(w, fmt.Sprintf("run %q", id), err)
		return
	}
	start, err := s.startPosition(r, run)
	var perr *positionError
	if errors.As(err, &perr) {
		writeError(w, http.StatusBadRequest, perr.Error())
		return
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("logs of run %q", id), err)
		return
	}
	st.setJobs(run, start)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // a proxy (nginx) must not hold the stream back
	w.WriteHeader(http.StatusOK)
	st.serve(run)
}
